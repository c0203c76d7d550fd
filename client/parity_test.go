package client_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// counterpart is a type the library and the network client each have
// their own of: in a signature, either side's stands for the other's.
var counterparts = map[string]bool{"Client": true, "Sender": true, "Receiver": true, "SessionReceiver": true, "StreamProcessor": true}

// parityPairs are the types whose methods the two sides share.
var parityPairs = []struct {
	name            string
	library, remote reflect.Type
}{
	{"Client", reflect.TypeFor[*sluice.Client](), reflect.TypeFor[*client.Client]()},
	{"Sender", reflect.TypeFor[*sluice.Sender](), reflect.TypeFor[*client.Sender]()},
	{"Receiver", reflect.TypeFor[*sluice.Receiver](), reflect.TypeFor[*client.Receiver]()},
	{"SessionReceiver", reflect.TypeFor[*sluice.SessionReceiver](), reflect.TypeFor[*client.SessionReceiver]()},
	{"StreamProcessor", reflect.TypeFor[*sluice.StreamProcessor](), reflect.TypeFor[*client.StreamProcessor]()},
}

// Reasons a method is one side's alone.
const (
	whyTx         = "joins the caller's database transaction: a server's client has no database"
	whyInProcess  = "an in-process hook of the library; the network client takes Options.Instrumentation"
	whyServerSide = "kept by a server while it runs: a library's process samples nothing"
	whyHandler    = "the library's Handler takes *sluice.Receiver, for CompleteTx and its neighbours; the network client's the portable sluice.MessageHandler, which MessageProcessor takes on both"
	whyNode       = "describes the library's own stream node; through a server, ConsumerStats asks the server's"
)

// onlyLibrary and onlyRemote list each side's methods the other lacks,
// by type, with the reason.
var (
	onlyLibrary = map[string]map[string]string{
		"Client": {
			"PublishTx":          whyTx,
			"Instrument":         whyInProcess,
			"Instrumentation":    whyInProcess,
			"ObserveMessages":    whyInProcess,
			"ObserveDeadLetters": whyInProcess,
			"StreamPartitions":   "the library reads the count when it opens; through a server it is a call (ClusterStatus, PublishPartition)",
		},
		"Sender":   {"SendTx": whyTx},
		"Receiver": {"CompleteTx": whyTx, "AbandonTx": whyTx, "DeadLetterTx": whyTx, "DeferTx": whyTx},
		"SessionReceiver": {
			"CompleteTx": whyTx, "AbandonTx": whyTx, "DeadLetterTx": whyTx, "DeferTx": whyTx, "SetSessionStateTx": whyTx,
			"Held": "reads the session's lock in the database; no RPC asks it (RenewSessionLock fails once it is lost)",
		},
		"StreamProcessor": {"HandleTx": whyTx, "NodeID": whyNode, "Stats": whyNode},
	}
	onlyRemote = map[string]map[string]string{
		"Client": {
			"ListEntityStats":        "one RPC for the dashboard's table; on a library, ListMessageEntities then GetQueueStats",
			"PublishPartition":       "the server says the partition; a library computes it (PartitionOf, StreamPartitions)",
			"ConsumerStats":          whyNode,
			"Throughput":             whyServerSide,
			"EntityHistory":          whyServerSide,
			"ConsumerLagHistory":     whyServerSide,
			"SubscriptionLagHistory": whyServerSide,
		},
	}
)

// differ lists, by type, the methods both sides have with signatures that
// differ by design, with the reason.
var differ = map[string]map[string]string{
	"Client": {"NewProcessor": whyHandler},
}

// TestParity fails when the library and the network client differ in a
// method (one lacks it, or its signature differs other than in each
// side's own counterpart types) that the tables above do not explain,
// or when a table names a method that is not one side's alone (or, for
// differ, one whose signatures agree).
func TestParity(t *testing.T) {
	for _, p := range parityPairs {
		t.Run(p.name, func(t *testing.T) {
			for _, d := range parityDiff(p.library, p.remote, onlyLibrary[p.name], onlyRemote[p.name], differ[p.name]) {
				t.Error(d)
			}
		})
	}
}

// TestParityCatchesOneSided checks that the comparison sees a method one
// side has alone, a signature that differs, and a stale exception.
func TestParityCatchesOneSided(t *testing.T) {
	lib := reflect.TypeFor[*sluice.Sender]()
	remote := reflect.TypeFor[*client.Sender]()
	// Without its exception, SendTx is one-sided.
	if d := parityDiff(lib, remote, nil, nil, nil); len(d) != 1 || !strings.Contains(d[0], "SendTx") {
		t.Errorf("without exceptions: %q, want SendTx reported", d)
	}
	// An exception for a method both have is stale.
	if d := parityDiff(lib, remote, map[string]string{"SendTx": whyTx, "Send": "stale"}, nil, nil); len(d) != 1 || !strings.Contains(d[0], "Send ") {
		t.Errorf("stale exception: %q, want Send reported", d)
	}
	// A signature that differs is reported.
	if d := parityDiff(lib, reflect.TypeFor[*skewedSender](), map[string]string{"SendTx": whyTx}, nil, nil); len(d) != 1 || !strings.Contains(d[0], "Send:") {
		t.Errorf("skewed signature: %q, want Send reported", d)
	}
	// A signature that differs by design is not, and such an exception
	// for a method whose signatures agree is stale.
	if d := parityDiff(lib, reflect.TypeFor[*skewedSender](), map[string]string{"SendTx": whyTx}, nil, map[string]string{"Send": "by design"}); len(d) != 0 {
		t.Errorf("skewed signature by design: %q, want none", d)
	}
	if d := parityDiff(lib, remote, map[string]string{"SendTx": whyTx}, nil, map[string]string{"SendBatch": "stale"}); len(d) != 1 || !strings.Contains(d[0], "SendBatch") {
		t.Errorf("stale difference: %q, want SendBatch reported", d)
	}
}

// skewedSender is a sender whose Send returns an int, not an int64.
type skewedSender struct{}

func (*skewedSender) Send(context.Context, *sluice.Message) (int, error) { return 0, nil }
func (*skewedSender) SendBatch(context.Context, []*sluice.Message) ([]int64, error) {
	return nil, nil
}
func (*skewedSender) CancelScheduled(context.Context, ...int64) error { return nil }

// parityDiff describes how the exported methods of lib and remote differ
// beyond the exceptions each side may have alone and the signatures that
// differ by design.
func parityDiff(lib, remote reflect.Type, libOnly, remoteOnly, differs map[string]string) []string {
	libSigs, remoteSigs := signatures(lib), signatures(remote)
	var diffs []string
	for name, sig := range libSigs {
		rsig, ok := remoteSigs[name]
		switch {
		case !ok && libOnly[name] == "":
			diffs = append(diffs, lib.String()+"."+name+" has no counterpart on "+remote.String()+" and no exception")
		case ok && rsig != sig && differs[name] == "":
			diffs = append(diffs, name+": "+lib.String()+" "+sig+" vs "+remote.String()+" "+rsig)
		case ok && libOnly[name] != "":
			diffs = append(diffs, name+" is excepted as the library's alone but both have it")
		}
	}
	for name := range remoteSigs {
		if _, ok := libSigs[name]; !ok && remoteOnly[name] == "" {
			diffs = append(diffs, remote.String()+"."+name+" has no counterpart on "+lib.String()+" and no exception")
		}
	}
	for name := range differs {
		if sig, ok := libSigs[name]; !ok || remoteSigs[name] == "" || remoteSigs[name] == sig {
			diffs = append(diffs, name+" is excepted as differing but "+lib.String()+" and "+remote.String()+" do not both have it with differing signatures")
		}
	}
	for name := range libOnly {
		if _, ok := libSigs[name]; !ok {
			diffs = append(diffs, name+" is excepted but "+lib.String()+" lacks it")
		}
	}
	for name := range remoteOnly {
		if _, ok := libSigs[name]; ok {
			diffs = append(diffs, name+" is excepted as the network client's alone but both have it")
		} else if _, ok := remoteSigs[name]; !ok {
			diffs = append(diffs, name+" is excepted but "+remote.String()+" lacks it")
		}
	}
	sort.Strings(diffs)
	return diffs
}

// signatures maps t's exported methods to their signatures, the receiver
// left out.
func signatures(t reflect.Type) map[string]string {
	out := make(map[string]string, t.NumMethod())
	for i := range t.NumMethod() {
		m := t.Method(i)
		var in, res []string
		for j := 1; j < m.Type.NumIn(); j++ {
			s := typeName(m.Type.In(j))
			if m.Type.IsVariadic() && j == m.Type.NumIn()-1 {
				s = "..." + strings.TrimPrefix(s, "[]")
			}
			in = append(in, s)
		}
		for j := range m.Type.NumOut() {
			res = append(res, typeName(m.Type.Out(j)))
		}
		out[m.Name] = "func(" + strings.Join(in, ", ") + ") (" + strings.Join(res, ", ") + ")"
	}
	return out
}

// typeName names t, with each side's counterpart types named alike.
func typeName(t reflect.Type) string {
	if t.Name() != "" {
		if counterparts[t.Name()] && (t.PkgPath() == reflect.TypeFor[sluice.Client]().PkgPath() || t.PkgPath() == reflect.TypeFor[client.Client]().PkgPath()) {
			return "own." + t.Name()
		}
		if t.PkgPath() == "" {
			return t.Name()
		}
		return t.PkgPath() + "." + t.Name()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + typeName(t.Elem())
	case reflect.Slice:
		return "[]" + typeName(t.Elem())
	case reflect.Map:
		return "map[" + typeName(t.Key()) + "]" + typeName(t.Elem())
	case reflect.Func:
		var in, res []string
		for j := range t.NumIn() {
			in = append(in, typeName(t.In(j)))
		}
		for j := range t.NumOut() {
			res = append(res, typeName(t.Out(j)))
		}
		return "func(" + strings.Join(in, ", ") + ") (" + strings.Join(res, ", ") + ")"
	}
	return t.String()
}
