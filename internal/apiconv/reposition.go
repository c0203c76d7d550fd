package apiconv

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice"
	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/stream"
)

var repositionTargets = map[string]sluicev1.RepositionTarget{
	"position": sluicev1.RepositionTarget_REPOSITION_TARGET_POSITION,
	"oldest":   sluicev1.RepositionTarget_REPOSITION_TARGET_OLDEST,
	"head":     sluicev1.RepositionTarget_REPOSITION_TARGET_HEAD,
}

// StreamReposition converts a recorded reposition to the wire (nil:
// none).
func StreamReposition(r *sluice.StreamReposition) *sluicev1.StreamReposition {
	if r == nil {
		return nil
	}
	out := &sluicev1.StreamReposition{Target: repositionTargets[r.To], By: r.By, At: ts(r.At)}
	for _, p := range slices.Sorted(maps.Keys(r.ToPositions)) {
		out.Moves = append(out.Moves, &sluicev1.PartitionMove{Partition: p, From: r.FromPositions[p], To: r.ToPositions[p]})
	}
	return out
}

// FromStreamReposition converts a recorded reposition from the wire.
func FromStreamReposition(r *sluicev1.StreamReposition) *sluice.StreamReposition {
	if r == nil {
		return nil
	}
	out := &sluice.StreamReposition{By: r.GetBy(), At: tm(r.GetAt()), FromPositions: map[int32]int64{}, ToPositions: map[int32]int64{}}
	for name, t := range repositionTargets {
		if t == r.GetTarget() {
			out.To = name
		}
	}
	for _, m := range r.GetMoves() {
		out.FromPositions[m.GetPartition()], out.ToPositions[m.GetPartition()] = m.GetFrom(), m.GetTo()
	}
	return out
}

// RepositionTarget converts where a reposition moves a subscription
// from the wire; INVALID_ARGUMENT for no target, or a position with
// another.
func RepositionTarget(t sluicev1.RepositionTarget, position int64) (sluice.StartPosition, error) {
	switch t {
	case sluicev1.RepositionTarget_REPOSITION_TARGET_POSITION:
		return sluice.FromPosition(position), nil
	case sluicev1.RepositionTarget_REPOSITION_TARGET_OLDEST, sluicev1.RepositionTarget_REPOSITION_TARGET_HEAD:
		if position != 0 {
			return sluice.StartPosition{}, fmt.Errorf("a position needs REPOSITION_TARGET_POSITION: %w", sluice.ErrInvalidArgument)
		}
		if t == sluicev1.RepositionTarget_REPOSITION_TARGET_OLDEST {
			return sluice.FromBeginning(), nil
		}
		return sluice.FromNow(), nil
	}
	return sluice.StartPosition{}, fmt.Errorf("reposition target %v: want a position, the oldest event or the head: %w", t, sluice.ErrInvalidArgument)
}

// ToRepositionTarget converts where a reposition moves a subscription to
// the wire.
func ToRepositionTarget(to sluice.StartPosition) (sluicev1.RepositionTarget, int64) {
	switch to.Kind() {
	case "beginning":
		return sluicev1.RepositionTarget_REPOSITION_TARGET_OLDEST, 0
	case "at":
		return sluicev1.RepositionTarget_REPOSITION_TARGET_POSITION, to.Position()
	}
	return sluicev1.RepositionTarget_REPOSITION_TARGET_HEAD, 0
}

// ConsumerPartitionStats converts a partition's stats on a node to the
// wire.
func ConsumerPartitionStats(ps sluice.StreamPartitionStats) *sluicev1.ConsumerPartitionStats {
	out := &sluicev1.ConsumerPartitionStats{Partition: ps.Partition, Epoch: ps.Epoch, Read: ps.Read,
		ProposedCheckpoint: ps.ProposedCheckpoint, StoredCheckpoint: ps.StoredCheckpoint,
		CachedRecords: int32(ps.CachedRecords), CachedBytes: ps.CachedBytes, SavedAt: ts(ps.SavedAt), TrimmedAt: ts(ps.TrimmedAt),
		Splits: ps.Splits, Merges: ps.Merges, RehydrationReads: ps.RehydrationReads, RehydratedRecords: ps.RehydratedRecords,
		Reclaimed: ps.Reclaimed, Resets: ps.Resets, ReadsAvoided: ps.ReadsAvoided, DuplicateReads: ps.DuplicateReads,
		RetentionGaps: ps.RetentionGaps, LaggingHeld: ps.LaggingHeld, Stopped: ps.Stopped}
	for _, w := range ps.Windows {
		out.Windows = append(out.Windows, &sluicev1.CacheWindow{Start: w.Start, End: w.End, Records: int32(w.Records), Bytes: w.Bytes,
			Head: w.Head, Members: int32(w.Members), Room: int32(w.Room), Wanted: int32(w.Wanted), Stream: w.Stream})
	}
	for _, s := range ps.Subscriptions {
		ss := &sluicev1.ConsumerSubscriptionStats{Id: s.ID, Consumer: s.Consumer, Position: s.Position, Cursor: s.Cursor,
			Handled: s.Handled, InFlight: int32(s.InFlight), Fault: s.Fault}
		if s.Window >= 0 {
			ss.Window = proto.Int32(int32(s.Window))
		}
		out.Subscriptions = append(out.Subscriptions, ss)
	}
	return out
}

// FromConsumerPartitionStats converts a partition's stats on a node from
// the wire. A subscription without a window has Window -1, as in the
// library.
func FromConsumerPartitionStats(ps *sluicev1.ConsumerPartitionStats) sluice.StreamPartitionStats {
	out := sluice.StreamPartitionStats{Partition: ps.GetPartition(), Epoch: ps.GetEpoch(), Read: ps.GetRead(),
		ProposedCheckpoint: ps.GetProposedCheckpoint(), StoredCheckpoint: ps.GetStoredCheckpoint(),
		CachedRecords: int(ps.GetCachedRecords()), CachedBytes: ps.GetCachedBytes(), SavedAt: tm(ps.GetSavedAt()), TrimmedAt: tm(ps.GetTrimmedAt()),
		Splits: ps.GetSplits(), Merges: ps.GetMerges(), RehydrationReads: ps.GetRehydrationReads(), RehydratedRecords: ps.GetRehydratedRecords(),
		Reclaimed: ps.GetReclaimed(), Resets: ps.GetResets(), ReadsAvoided: ps.GetReadsAvoided(), DuplicateReads: ps.GetDuplicateReads(),
		RetentionGaps: ps.GetRetentionGaps(), LaggingHeld: ps.GetLaggingHeld(), Stopped: ps.GetStopped()}
	for _, w := range ps.GetWindows() {
		out.Windows = append(out.Windows, sluice.StreamCacheWindow{Start: w.GetStart(), End: w.GetEnd(), Records: int(w.GetRecords()),
			Bytes: w.GetBytes(), Head: w.GetHead(), Members: int(w.GetMembers()), Room: int(w.GetRoom()), Wanted: int(w.GetWanted()),
			Stream: w.GetStream()})
	}
	for _, s := range ps.GetSubscriptions() {
		window := -1
		if s.Window != nil {
			window = int(s.GetWindow())
		}
		out.Subscriptions = append(out.Subscriptions, stream.SubscriptionStats{ID: s.GetId(), Consumer: s.GetConsumer(),
			Position: s.GetPosition(), Cursor: s.GetCursor(), Handled: s.GetHandled(), InFlight: int(s.GetInFlight()), Fault: s.GetFault(), Window: window})
	}
	return out
}
