package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
)

// consumerPartitionView is a partition of a consumer's node as --json
// prints it.
type consumerPartitionView struct {
	Partition          int32                      `json:"partition"`
	Epoch              int64                      `json:"epoch"`
	Read               int64                      `json:"read"`
	ProposedCheckpoint int64                      `json:"proposedCheckpoint"`
	StoredCheckpoint   int64                      `json:"storedCheckpoint"`
	CachedRecords      int                        `json:"cachedRecords"`
	CachedBytes        int64                      `json:"cachedBytes"`
	Windows            []cacheWindowView          `json:"windows"`
	Splits             int64                      `json:"splits"`
	Merges             int64                      `json:"merges"`
	Resets             int64                      `json:"resets"`
	RehydrationReads   int64                      `json:"rehydrationReads"`
	RehydratedRecords  int64                      `json:"rehydratedRecords"`
	ReadsAvoided       int64                      `json:"readsAvoided"`
	DuplicateReads     int64                      `json:"duplicateReads"`
	Reclaimed          int64                      `json:"reclaimed"`
	RetentionGaps      int64                      `json:"retentionGaps"`
	LaggingHeld        int64                      `json:"laggingHeld"`
	Subscriptions      []consumerSubscriptionView `json:"subscriptions"`
	SavedAt            time.Time                  `json:"savedAt,omitzero"`
	TrimmedAt          time.Time                  `json:"trimmedAt,omitzero"`
	Stopped            string                     `json:"stopped,omitempty"`
}

// cacheWindowView is a resident window of a partition's cache: it holds
// positions start through end (none when end is start-1). Pressure says
// its members want records it has no room to read; stream, absent for
// the whole partition, is the one stream it reads.
type cacheWindowView struct {
	Start    int64  `json:"start"`
	End      int64  `json:"end"`
	Records  int    `json:"records"`
	Bytes    int64  `json:"bytes"`
	Head     bool   `json:"head"`
	Members  int    `json:"members"`
	Room     int    `json:"room"`
	Wanted   int    `json:"wanted"`
	Pressure bool   `json:"pressure"`
	Stream   string `json:"stream,omitempty"`
}

// consumerSubscriptionView is a subscription of a partition; window is
// the index in windows of the one it reads, absent when it reads none.
type consumerSubscriptionView struct {
	ID       string `json:"id"`
	Consumer string `json:"consumer"`
	Position int64  `json:"position"`
	Cursor   int64  `json:"cursor"`
	Handled  bool   `json:"handled"`
	InFlight int    `json:"inFlight"`
	Fault    string `json:"fault,omitempty"`
	Window   *int   `json:"window,omitempty"`
}

func viewConsumerPartition(p *sluice.StreamPartitionStats) consumerPartitionView {
	v := consumerPartitionView{Partition: p.Partition, Epoch: p.Epoch, Read: p.Read, ProposedCheckpoint: p.ProposedCheckpoint,
		StoredCheckpoint: p.StoredCheckpoint, CachedRecords: p.CachedRecords, CachedBytes: p.CachedBytes,
		Windows: []cacheWindowView{}, Splits: p.Splits, Merges: p.Merges, Resets: p.Resets, RehydrationReads: p.RehydrationReads,
		RehydratedRecords: p.RehydratedRecords, ReadsAvoided: p.ReadsAvoided, DuplicateReads: p.DuplicateReads,
		Reclaimed: p.Reclaimed, RetentionGaps: p.RetentionGaps, LaggingHeld: p.LaggingHeld, Subscriptions: []consumerSubscriptionView{},
		SavedAt: p.SavedAt.UTC(), TrimmedAt: p.TrimmedAt.UTC(), Stopped: p.Stopped}
	for _, w := range p.Windows {
		v.Windows = append(v.Windows, cacheWindowView{Start: w.Start, End: w.End, Records: w.Records, Bytes: w.Bytes, Head: w.Head,
			Members: w.Members, Room: w.Room, Wanted: w.Wanted, Pressure: underPressure(w), Stream: w.Stream})
	}
	for _, s := range p.Subscriptions {
		sv := consumerSubscriptionView{ID: s.ID, Consumer: s.Consumer, Position: s.Position, Cursor: s.Cursor, Handled: s.Handled,
			InFlight: s.InFlight, Fault: s.Fault}
		if s.Window >= 0 {
			sv.Window = &s.Window
		}
		v.Subscriptions = append(v.Subscriptions, sv)
	}
	return v
}

func opStreamStats() *op {
	return &op{name: "stream stats", args: "CONSUMER", minArgs: 1, maxArgs: 1, streams: true,
		about: "Prints the partitions a server's stream node of a consumer pulls (while a Consume stream of it is\n" +
			"open there): for each, the last position read, the checkpoint the node proposes (its subscriptions'\n" +
			"lowest position) and the checkpoint stored (which other subscriptions may hold back), what its\n" +
			"cache holds: its resident windows (the positions each holds, the head window, which reads ahead,\n" +
			"marked *), the windows split off for lagging subscriptions, merged back and reset at the window\n" +
			"limit, the records lagging windows read again (in how many reads), the records a window took over\n" +
			"from another rather than read (AVOIDED) and those read that another held (DUPLICATE), the records\n" +
			"reclaimed from a read-ahead for another window's reserve, and the retention gaps met; then each\n" +
			"window with the records it may read now (ROOM) and its members want (WANTED), under pressure when\n" +
			"they want some and it has no room, and the one stream it reads (- for the whole partition); then\n" +
			"each subscription with its cursor (every record to it examined) and the window it reads.\n" +
			"Needs --server.",
		run: func(ctx context.Context, e *env, args []string) error {
			node, parts, err := e.api.consumerStats(ctx, args[0])
			if err != nil {
				return err
			}
			if e.json {
				for i := range parts {
					if err := e.emit(viewConsumerPartition(&parts[i])); err != nil {
						return err
					}
				}
				return nil
			}
			fmt.Fprintf(e.stdout, "node %s\n", node)
			if err := printConsumerPartitions(e.stdout, parts); err != nil {
				return err
			}
			if err := printCacheWindows(e.stdout, parts); err != nil {
				return err
			}
			return printConsumerSubscriptions(e.stdout, parts)
		}}
}

func printConsumerPartitions(out io.Writer, parts []sluice.StreamPartitionStats) error {
	tw := table(out)
	fmt.Fprintln(tw, "PARTITION\tEPOCH\tREAD\tPROPOSED CHECKPOINT\tSTORED CHECKPOINT\tCACHED\tWINDOWS\tRESIDENT\tSPLITS/MERGES\tRESETS\t"+
		"REHYDRATED\tAVOIDED/DUPLICATE\tRECLAIMED\tGAPS\tHELD\tSAVED")
	for _, p := range parts {
		saved := when(p.SavedAt)
		if p.Stopped != "" {
			saved += " (stopped: " + p.Stopped + ")"
		}
		rehydrated := "-"
		if p.RehydrationReads > 0 {
			rehydrated = fmt.Sprintf("%d in %d reads", p.RehydratedRecords, p.RehydrationReads)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d/%d\t%d\t%s\t%d/%d\t%d\t%d\t%d\t%s\n", p.Partition, p.Epoch, p.Read,
			p.ProposedCheckpoint, p.StoredCheckpoint, p.CachedRecords, len(p.Windows), resident(p.Windows),
			p.Splits, p.Merges, p.Resets, rehydrated, p.ReadsAvoided, p.DuplicateReads, p.Reclaimed, p.RetentionGaps, p.LaggingHeld, saved)
	}
	return tw.Flush()
}

// printCacheWindows prints each partition's windows, after a blank line:
// what each holds, its room and wanted records, whether it is under
// pressure, and the stream it reads ("-": the whole partition's).
func printCacheWindows(out io.Writer, parts []sluice.StreamPartitionStats) error {
	tw := section(out, parts, func(p sluice.StreamPartitionStats) int { return len(p.Windows) })
	if tw == nil {
		return nil
	}
	fmt.Fprintln(tw, "PARTITION\tWINDOW\tPOSITIONS\tRECORDS\tBYTES\tMEMBERS\tROOM\tWANTED\tPRESSURE\tSTREAM")
	for _, p := range parts {
		for i, w := range p.Windows {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", p.Partition, i, windowRange(w), w.Records, w.Bytes,
				w.Members, w.Room, w.Wanted, yesNo(underPressure(w)), orDash(w.Stream))
		}
	}
	return tw.Flush()
}

// underPressure says a window's members want records it has no room to
// read.
func underPressure(w sluice.StreamCacheWindow) bool {
	return w.Wanted > 0 && w.Room == 0
}

// printConsumerSubscriptions prints the partitions' subscriptions, after
// a blank line; nothing when there are none.
func printConsumerSubscriptions(out io.Writer, parts []sluice.StreamPartitionStats) error {
	tw := section(out, parts, func(p sluice.StreamPartitionStats) int { return len(p.Subscriptions) })
	if tw == nil {
		return nil
	}
	fmt.Fprintln(tw, "PARTITION\tSUBSCRIPTION\tCONSUMER\tPOSITION\tCURSOR\tHANDLED\tIN FLIGHT\tWINDOW\tFAULT")
	for _, p := range parts {
		for _, s := range p.Subscriptions {
			window, handled := "-", "no"
			if s.Window >= 0 && s.Window < len(p.Windows) {
				window = fmt.Sprintf("%d: %s", s.Window, windowRange(p.Windows[s.Window]))
			}
			if s.Handled {
				handled = "yes"
			}
			fault := s.Fault
			if fault == "" {
				fault = "-"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%d\t%s\t%s\n", p.Partition, s.ID, s.Consumer, s.Position, s.Cursor, handled,
				s.InFlight, window, fault)
		}
	}
	return tw.Flush()
}

// section starts a table of the partitions' rows after a blank line, or
// returns nil when they have none (rows counts a partition's).
func section(out io.Writer, parts []sluice.StreamPartitionStats, rows func(sluice.StreamPartitionStats) int) *tabwriter.Writer {
	n := 0
	for _, p := range parts {
		n += rows(p)
	}
	if n == 0 {
		return nil
	}
	fmt.Fprintln(out)
	return table(out)
}

// resident lists the windows' ranges, "-" for none.
func resident(ws []sluice.StreamCacheWindow) string {
	if len(ws) == 0 {
		return "-"
	}
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = windowRange(w)
	}
	return strings.Join(out, " ")
}

// windowRange is the positions a window holds, "FIRST-LAST" (an empty
// one "FIRST-(empty)"), marked * when it is the head window.
func windowRange(w sluice.StreamCacheWindow) string {
	s := fmt.Sprintf("%d-%d", w.Start, w.End)
	if w.End < w.Start {
		s = fmt.Sprintf("%d-(empty)", w.Start)
	}
	if w.Head {
		s += "*"
	}
	return s
}
