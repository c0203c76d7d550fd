package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// nodeView and partitionView are the lines of cluster status --json,
// told apart by their kind.
type nodeView struct {
	Kind        string    `json:"kind"` // "node"
	ID          string    `json:"id"`
	Group       string    `json:"group"`
	Consumers   []string  `json:"consumers"`
	Address     string    `json:"address,omitempty"`
	Alive       bool      `json:"alive"`
	StartedAt   time.Time `json:"startedAt"`
	HeartbeatAt time.Time `json:"heartbeatAt"`
	Partitions  []int32   `json:"partitions"`
}

type partitionView struct {
	Kind          string                `json:"kind"` // "partition"
	Partition     int32                 `json:"partition"`
	Owner         string                `json:"owner,omitempty"`
	Held          bool                  `json:"held"`
	Epoch         int64                 `json:"epoch"`
	LeaseUntil    time.Time             `json:"leaseUntil,omitzero"`
	Head          int64                 `json:"head"`
	Checkpoint    int64                 `json:"checkpoint"`
	Lag           int64                 `json:"lag"`
	CacheWindows  int                   `json:"cacheWindows"`
	CachedRecords int64                 `json:"cachedRecords"`
	Subscriptions []subscriptionLagView `json:"subscriptions"`
	Leases        []groupLeaseView      `json:"leases"`
}

type groupLeaseView struct {
	Group         string    `json:"group"`
	Owner         string    `json:"owner,omitempty"`
	Held          bool      `json:"held"`
	Epoch         int64     `json:"epoch"`
	LeaseUntil    time.Time `json:"leaseUntil,omitzero"`
	CacheWindows  int       `json:"cacheWindows"`
	CachedRecords int64     `json:"cachedRecords"`
}

type subscriptionLagView struct {
	ID        string `json:"id"`
	Position  int64  `json:"position"`
	Lag       int64  `json:"lag"`
	Consumer  string `json:"consumer,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Key       string `json:"key,omitempty"`
	Fault     string `json:"fault,omitempty"`
}

// streamOf names what a subscription reads: a stream, or a whole
// namespace ("NAMESPACE/*"); "-" for one deleted meanwhile.
func streamOf(s sluice.SubscriptionLag) string {
	switch {
	case s.Namespace == "":
		return "-"
	case s.Key == "":
		return s.Namespace + "/*"
	}
	return sluice.StreamID{Namespace: s.Namespace, Key: s.Key}.String()
}

func opClusterStatus() *op {
	return &op{name: "cluster status", streams: true,
		about: "Prints the stream nodes with their groups, consumers, liveness and partitions, each partition's\n" +
			"owner in each group, head, checkpoint and lag, what the owner's cache of it holds (the records\n" +
			"CACHED in how many WINDOWS, as of its last lease renewal; - while nobody holds the lease), and the\n" +
			"subscriptions' lag.",
		run: func(ctx context.Context, e *env, _ []string) error {
			st, err := e.api.ClusterStatus(ctx)
			if err != nil {
				return err
			}
			if e.json {
				return e.emitCluster(st)
			}
			return e.printCluster(st)
		}}
}

func (e *env) emitCluster(st sluice.ClusterStatus) error {
	for _, n := range st.Nodes {
		v := nodeView{Kind: "node", ID: n.ID, Group: n.Group, Consumers: n.Consumers, Address: n.Address, Alive: n.Alive,
			StartedAt: n.StartedAt.UTC(), HeartbeatAt: n.HeartbeatAt.UTC(), Partitions: n.Partitions}
		if v.Partitions == nil {
			v.Partitions = []int32{}
		}
		if v.Consumers == nil {
			v.Consumers = []string{}
		}
		if err := e.emit(v); err != nil {
			return err
		}
	}
	for _, p := range st.Partitions {
		v := partitionView{Kind: "partition", Partition: p.Partition, Owner: p.Owner, Held: p.Held, Epoch: p.Epoch,
			LeaseUntil: p.LeaseUntil.UTC(), Head: p.Head, Checkpoint: p.Checkpoint, Lag: p.Lag, CacheWindows: p.CacheWindows,
			CachedRecords: p.CachedRecords, Subscriptions: []subscriptionLagView{}, Leases: []groupLeaseView{}}
		for _, l := range p.Leases {
			v.Leases = append(v.Leases, groupLeaseView{Group: l.Group, Owner: l.Owner, Held: l.Held, Epoch: l.Epoch,
				LeaseUntil: l.LeaseUntil.UTC(), CacheWindows: l.CacheWindows, CachedRecords: l.CachedRecords})
		}
		for _, s := range p.Subscriptions {
			v.Subscriptions = append(v.Subscriptions, subscriptionLagView{ID: s.ID, Position: s.Position, Lag: s.Lag,
				Consumer: s.Consumer, Namespace: s.Namespace, Key: s.Key, Fault: s.Fault})
		}
		if err := e.emit(v); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) printCluster(st sluice.ClusterStatus) error {
	tw := table(e.stdout)
	if len(st.Nodes) == 0 {
		fmt.Fprintln(tw, "no stream nodes")
	} else {
		fmt.Fprintln(tw, "NODE\tGROUP\tCONSUMERS\tADDRESS\tALIVE\tSTARTED\tHEARTBEAT\tPARTITIONS")
		for _, n := range st.Nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, groupName(n.Group), orDash(strings.Join(n.Consumers, ",")),
				orDash(n.Address), yesNo(n.Alive), when(n.StartedAt), when(n.HeartbeatAt), partitionList(n.Partitions))
		}
	}
	fmt.Fprintln(tw, "\nPARTITION\tGROUP\tOWNER\tHELD\tEPOCH\tHEAD\tCHECKPOINT\tLAG\tCACHED\tWINDOWS")
	var subs [][]string
	for _, p := range st.Partitions {
		leases := p.Leases
		if len(leases) == 0 { // never leased
			leases = []sluice.GroupLease{{}}
		}
		for _, l := range leases {
			cached, windows := "-", "-" // nobody holds a cache of it
			if l.Held {
				cached, windows = fmt.Sprint(l.CachedRecords), fmt.Sprint(l.CacheWindows)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", p.Partition, groupName(l.Group), orDash(l.Owner), yesNo(l.Held),
				l.Epoch, p.Head, p.Checkpoint, p.Lag, cached, windows)
		}
		for _, s := range p.Subscriptions {
			subs = append(subs, []string{s.ID, orDash(s.Consumer), streamOf(s), fmt.Sprint(p.Partition), fmt.Sprint(s.Position),
				fmt.Sprint(s.Lag)})
		}
	}
	if len(subs) > 0 {
		fmt.Fprintln(tw, "\nSUBSCRIPTION\tCONSUMER\tSTREAM\tPARTITION\tPOSITION\tLAG")
		for _, s := range subs {
			fmt.Fprintln(tw, strings.Join(s, "\t"))
		}
	}
	return tw.Flush()
}

// groupName names a stream group, "default" for "".
func groupName(g string) string {
	if g == "" {
		return "default"
	}
	return g
}

// partitionList formats partition numbers: "0,1,5", or "-" for none.
func partitionList(parts []int32) string {
	if len(parts) == 0 {
		return "-"
	}
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}
