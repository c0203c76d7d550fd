package sluice

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Partitioned queues (Service Bus EnablePartitioning): a queue created
// with PartitionCount N > 1 stores its messages in N partitions, each a
// storage queue with its own sequence counter, its own locks and its own
// commit pipeline, so that one queue's sends, receives and settlements
// spread over several of them.
//
// Partition 0 is the queue's own storage queue (an unpartitioned queue is
// a queue of one partition); partition p > 0 is the storage queue named
// "<queue>/partitions/<p>", a name no entity may take. A message's
// sequence number carries its partition in its top 16 bits, as Service
// Bus's do, and is gap-free and in commit order within its partition.
//
// A message goes to the partition its SessionID picks, else its
// PartitionKey, else (on a queue with duplicate detection) its MessageID;
// other messages take turns, the unkeyed messages of one moment (and of
// one batch) together. Duplicate detection and a session's order and
// state thus hold per partition, which is every message of a key. A
// receive asks the partitions in turn until one has messages (see
// Receiver.take), so that none is left behind.

// MaxPartitionCount bounds a queue's PartitionCount, as Service Bus's 16
// partitions of a Standard entity do.
const MaxPartitionCount = 16

// partitionsSegment joins a partitioned queue's name and a partition's
// number in the partition's storage name.
const partitionsSegment = "/partitions/"

// partitionShift is where a sequence number's partition begins: its top
// 16 bits hold the partition, the rest the partition's own number.
const partitionShift = 48

// maxPartitionedNameLength leaves room in a partitioned queue's name for
// its partitions' suffix.
const maxPartitionedNameLength = store.MaxNameLen - len(partitionsSegment) - 2

// errPartitionName reports a partition's storage name given where an
// entity's name belongs: no entity has it.
var errPartitionName = fmt.Errorf("a partition of a partitioned queue, reached only through its queue: %w", ErrEntityNotFound)

// partitionedQueue returns the queue whose partition's storage name is
// q, or q itself when it names no partition.
func partitionedQueue(q string) string {
	i := strings.LastIndex(q, partitionsSegment)
	if i < 0 {
		return q
	}
	if _, err := strconv.Atoi(q[i+len(partitionsSegment):]); err != nil {
		return q
	}
	return q[:i]
}

// partitionQueue is the storage queue of a queue's partition p.
func partitionQueue(queue string, p int) string {
	if p == 0 {
		return queue
	}
	return queue + partitionsSegment + strconv.Itoa(p)
}

// publicSeq is the sequence number callers see of a partition's number.
func publicSeq(p int, seq int64) int64 {
	if seq == 0 {
		return 0 // no message
	}
	return int64(p)<<partitionShift | seq
}

// splitSeq splits a sequence number callers give into its partition and
// the partition's own number.
func splitSeq(seq int64) (p int, own int64) {
	return int(uint64(seq) >> partitionShift), seq & (1<<partitionShift - 1)
}

// partitions returns how many partitions an entity has (at least 1).
func (p QueueProperties) partitions() int {
	return max(1, p.PartitionCount)
}

// partitionOfKey picks the partition of a session or partition key.
func partitionOfKey(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// partitionKey returns the key that pins m to a partition ("" for none):
// its SessionID, else its PartitionKey, else its MessageID when the
// queue detects duplicates.
func partitionKey(m *store.NewMessage, dedup bool) string {
	switch {
	case m.SessionID != "":
		return m.SessionID
	case m.PartitionKey != "":
		return m.PartitionKey
	case dedup:
		return m.MessageID
	}
	return ""
}

// spreadWindow is how long a client's unkeyed messages go to one
// partition before the next takes them.
const spreadWindow = 5 * time.Millisecond

// spread picks the partition of unkeyed messages: the partitions take
// turns, each for a spreadWindow, from a point of the client's own. The
// sends of one moment thus go to one partition, so that those that meet
// in a group commit stay one statement on one counter row (a send a
// message round-robin split every group across the partitions and
// measured a third slower on PostgreSQL); over time every partition gets
// its share; and clients, each from its own point, write to different
// partitions at once.
func (c *Client) spread(n int) int {
	turn := uint64(time.Now().UnixNano()) / uint64(spreadWindow)
	return int((turn + uint64(c.spreadFrom)) % uint64(n))
}

// partitionBatch splits a batch of messages sent to a partitioned queue
// into one batch per partition, with for each batch the indexes of its
// messages in msgs. The unkeyed messages of a batch go to one partition.
func (c *Client) partitionBatch(e *entity, msgs []store.NewMessage) ([]store.EnqueueParams, [][]int) {
	n := e.props.partitions()
	unkeyed := -1
	at := map[int]int{}
	var (
		out     []store.EnqueueParams
		indexes [][]int
	)
	for i := range msgs {
		var p int
		if key := partitionKey(&msgs[i], e.props.RequiresDuplicateDetection); key != "" {
			p = partitionOfKey(key, n)
		} else {
			if unkeyed < 0 {
				unkeyed = c.spread(n)
			}
			p = unkeyed
		}
		j, ok := at[p]
		if !ok {
			j = len(out)
			at[p] = j
			out = append(out, store.EnqueueParams{Queue: partitionQueue(e.name, p)})
			indexes = append(indexes, nil)
		}
		out[j].Messages = append(out[j].Messages, msgs[i])
		indexes[j] = append(indexes[j], i)
	}
	return out, indexes
}

// partitionFor returns the storage queue of the partition of e that a
// message routed to it (forwarded, copied from a topic) goes to: e
// itself when it is not partitioned.
func (c *Client) partitionFor(e *entity, m *store.NewMessage) string {
	n := e.props.partitions()
	if n == 1 {
		return e.name
	}
	if key := partitionKey(m, e.props.RequiresDuplicateDetection); key != "" {
		return partitionQueue(e.name, partitionOfKey(key, n))
	}
	return partitionQueue(e.name, c.spread(n))
}

// partitionOfQueue returns the partition whose storage queue is q, of
// the partitioned queue named queue.
func partitionOfQueue(queue, q string) int {
	if q == queue {
		return 0
	}
	p, _ := strconv.Atoi(q[len(queue)+len(partitionsSegment):])
	return p
}

// publicLeased gives leased messages of partition p the numbers callers
// see.
func publicLeased(p int, ls []sluicetype.Leased) {
	if p == 0 {
		return
	}
	for i := range ls {
		ls[i].Seq = publicSeq(p, ls[i].Seq)
		ls[i].Receipt.Seq = publicSeq(p, ls[i].Receipt.Seq)
	}
}

// publicMessages gives messages of partition p the numbers callers see.
func publicMessages(p int, ms []sluicetype.Message) {
	if p == 0 {
		return
	}
	for i := range ms {
		ms[i].Seq = publicSeq(p, ms[i].Seq)
	}
}

// publicDeadLetters gives dead letters of partition p the numbers
// callers see.
func publicDeadLetters(p int, ds []sluicetype.DeadLetter) {
	if p == 0 {
		return
	}
	for i := range ds {
		ds[i].Seq = publicSeq(p, ds[i].Seq)
		ds[i].Receipt.Seq = publicSeq(p, ds[i].Receipt.Seq)
	}
}

// seqGroup is the sequence numbers of one partition, with their indexes
// in the caller's list.
type seqGroup struct {
	part    int
	seqs    []int64
	indexes []int
}

// groupSeqs groups sequence numbers callers gave by partition, in the
// order partitions first appear, with the partitions' own numbers. It
// counts apart, as missing, numbers of partitions the queue's n lack
// (they name no message), and refuses a number below 1 or whose own
// part is 0.
func groupSeqs(seqs []int64, n int) (groups []seqGroup, missing int, err error) {
	for i, seq := range seqs {
		p, own := splitSeq(seq)
		switch {
		case seq < 1 || own < 1:
			return nil, 0, fmt.Errorf("sequence number %d: no message has it: %w", seq, ErrInvalidArgument)
		case p >= n:
			missing++
			continue
		}
		j := slices.IndexFunc(groups, func(g seqGroup) bool { return g.part == p })
		if j < 0 {
			j = len(groups)
			groups = append(groups, seqGroup{part: p})
		}
		groups[j].seqs = append(groups[j].seqs, own)
		groups[j].indexes = append(groups[j].indexes, i)
	}
	return groups, missing, nil
}

// groupAllSeqs is groupSeqs for calls whose numbers must all name
// messages: a number of a partition the queue lacks is
// ErrMessageNotFound.
func groupAllSeqs(seqs []int64, n int) ([]seqGroup, error) {
	groups, missing, err := groupSeqs(seqs, n)
	if err == nil && missing > 0 {
		err = fmt.Errorf("%d sequence numbers name partitions the queue (of %d) lacks: %w", missing, n, ErrMessageNotFound)
	}
	return groups, err
}

// receiptGroup is the receipts of one partition, with their indexes in
// the caller's list.
type receiptGroup struct {
	part     int
	receipts []sluicetype.Receipt
	indexes  []int
}

// groupReceipts groups receipts by partition, with the partitions' own
// numbers, in the order partitions first appear.
func groupReceipts(receipts []sluicetype.Receipt) []receiptGroup {
	var out []receiptGroup
	for i, r := range receipts {
		p, own := splitSeq(r.Seq)
		j := slices.IndexFunc(out, func(g receiptGroup) bool { return g.part == p })
		if j < 0 {
			j = len(out)
			out = append(out, receiptGroup{part: p})
		}
		out[j].receipts = append(out[j].receipts, sluicetype.Receipt{Seq: own, Token: r.Token})
		out[j].indexes = append(out[j].indexes, i)
	}
	return out
}

// settleParts settles receipts of a queue, or of its dead-letter queue,
// and returns the results in the receipts' order. On a partitioned
// queue it settles partition by partition: each partition's receipts
// atomically, the whole not. A receipt of a partition the queue lacks
// has lost its lock; a partition whose settle fails (when others are
// settled too) fails its own receipts alone.
func (c *Client) settleParts(ctx context.Context, p *store.SettleParams, dead bool) ([]store.SettleResult, error) {
	settle := c.st.Settle
	if dead {
		settle = c.st.SettleDeadLetters
	}
	groups := groupReceipts(p.Receipts)
	if len(groups) == 1 && groups[0].part == 0 {
		return settle(ctx, p) // partition 0's numbers are its own
	}
	n, err := c.partitionsOf(ctx, p.Queue)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		return settle(ctx, p) // storage finds no lock for such numbers
	}
	out := make([]store.SettleResult, len(p.Receipts))
	for _, g := range groups {
		if g.part >= n {
			for _, i := range g.indexes {
				out[i].Err = fmt.Errorf("sequence number %d names partition %d; the queue has %d: %w",
					p.Receipts[i].Seq, g.part, n, ErrLockLost)
			}
			continue
		}
		gp := *p
		gp.Queue, gp.Receipts = partitionQueue(p.Queue, g.part), g.receipts
		res, err := settle(ctx, &gp)
		if err != nil && len(groups) == 1 {
			return nil, err
		}
		for k, i := range g.indexes {
			if err != nil {
				out[i].Err = err
			} else {
				out[i] = res[k]
			}
		}
	}
	return out, nil
}

// eachPartition calls fn with each partition's storage queue of a
// queue of n partitions, from partition from on, wrapping around, until
// fn says it is done or fails.
func eachPartition(queue string, n, from int, fn func(p int, q string) (done bool, err error)) error {
	for k := range n {
		p := (from + k) % n
		done, err := fn(p, partitionQueue(queue, p))
		if err != nil || done {
			return err
		}
	}
	return nil
}

// createPartitions creates the partition rows (partitionRows) of
// a partitioned queue or subscription, after its own row (which claims
// the name: a create that loses the race for it stops there). A
// partition's row there already was left by a delete that did not
// finish (it deletes the entity's own row first): it belongs to no
// entity, so it is deleted, with what it holds, and created anew.
func (c *Client) createPartitions(ctx context.Context, rows []store.QueueSettings) error {
	for i := range rows {
		ps := &rows[i]
		err := c.st.CreateQueue(ctx, ps)
		if errors.Is(err, ErrEntityExists) {
			if err = c.dropPartition(ctx, ps.Name); err == nil {
				err = c.st.CreateQueue(ctx, ps)
			}
		}
		if err != nil {
			return fmt.Errorf("sluice: create %q: %w", ps.Name, err)
		}
	}
	return nil
}

// dropPartition deletes the partition row named q, refusing a row of
// another kind (a queue of that name made before partitions existed).
func (c *Client) dropPartition(ctx context.Context, q string) error {
	s, err := c.st.GetQueue(ctx, q)
	if err != nil {
		return err
	}
	if e, err := decodeEntity(s); err != nil || e.kind != kindPartition {
		return fmt.Errorf("%q is taken by another entity: %w", q, ErrEntityExists)
	}
	if err := c.st.DeleteQueue(ctx, q); err != nil && !errors.Is(err, ErrEntityNotFound) {
		return err
	}
	return nil
}

// updatePartitions gives the partitions their rows' new settings.
func (c *Client) updatePartitions(ctx context.Context, rows []store.QueueSettings) error {
	for i := range rows {
		if err := c.st.UpdateQueue(ctx, &rows[i]); err != nil {
			return fmt.Errorf("sluice: update %q: %w", rows[i].Name, err)
		}
	}
	return nil
}

// deletePartitions deletes the partition rows of a queue or
// subscription whose own row is gone: those of its partition count and
// any an earlier create or delete left. Rows of other kinds under the
// name stay.
func (c *Client) deletePartitions(ctx context.Context, queue string) error {
	if len(queue) > maxPartitionedNameLength {
		return nil // too long a name to have partitions
	}
	page, err := c.st.ListQueues(ctx, &store.ListParams{Prefix: queue + partitionsSegment, Max: c.limits.MaxBatch})
	if err != nil {
		return err
	}
	for _, s := range page {
		if e, err := decodeEntity(s); err != nil || e.kind != kindPartition || partitionedQueue(s.Name) != queue {
			continue
		}
		if err := c.st.DeleteQueue(ctx, s.Name); err != nil && !errors.Is(err, ErrEntityNotFound) {
			return fmt.Errorf("sluice: delete %q: %w", queue, err)
		}
	}
	return nil
}

// partitionRows are the storage settings of partitions 1 to n-1 of e,
// whose own are s: the same, under the partitions' names, and marked as
// partitions so that no listing shows them and no call reaches them by
// name. None for an unpartitioned entity, and for a topic, which holds
// no messages (its subscriptions are partitioned).
func (e *entity) partitionRows(s *store.QueueSettings) ([]store.QueueSettings, error) {
	n := e.props.partitions()
	if n == 1 || e.kind == kindTopic {
		return nil, nil
	}
	pe := *e
	pe.kind = kindPartition
	attrs, err := pe.attributes()
	if err != nil {
		return nil, err
	}
	rows := make([]store.QueueSettings, n-1)
	for i := range rows {
		rows[i] = *s
		rows[i].Name, rows[i].Attributes = partitionQueue(s.Name, i+1), attrs
	}
	return rows, nil
}

// partitionStats adds up the stats of a queue's partitions.
func (c *Client) partitionStats(ctx context.Context, queue string, n int) (QueueStats, error) {
	var total QueueStats
	for p := range n {
		st, err := c.st.QueueStats(ctx, partitionQueue(queue, p))
		if err != nil {
			return QueueStats{}, err
		}
		total = addStats(total, st)
	}
	return total, nil
}

// addStats adds b's counts to a's; the ages are the older of the two.
func addStats(a, b QueueStats) QueueStats {
	a.Active += b.Active
	a.Expired += b.Expired
	a.Scheduled += b.Scheduled
	a.InFlight += b.InFlight
	a.Deferred += b.Deferred
	a.DeadLettered += b.DeadLettered
	a.OldestAge = max(a.OldestAge, b.OldestAge)
	a.OldestDeferredAge = max(a.OldestDeferredAge, b.OldestDeferredAge)
	return a
}

// eachPartitionCount calls fn with the storage queue of each partition of
// entity (the entity's own, unpartitioned) and adds up what it counts,
// stopping at the first failure.
func (c *Client) eachPartitionCount(ctx context.Context, entity string, fn func(q string) (int64, error)) (int64, error) {
	n, err := c.partitionsOf(ctx, entity)
	if err != nil {
		return 0, err
	}
	var total int64
	for p := range n {
		k, err := fn(partitionQueue(entity, p))
		if total += k; err != nil {
			return total, err
		}
	}
	return total, nil
}

// partitionsOf returns how many partitions the entity named name has
// (1 when it is not a partitioned queue). An entity that does not exist
// has 1: the call the caller makes next reports it.
func (c *Client) partitionsOf(ctx context.Context, name string) (int, error) {
	e, err := c.entity(ctx, name)
	if errors.Is(err, ErrEntityNotFound) && !errors.Is(err, errPartitionName) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	return e.props.partitions(), nil
}

// leaseDeferredParts is LeaseDeferred on a queue of n partitions: one
// lease per partition the numbers name. If one fails, the deferred
// messages leased before it are released, deferred again, and the call
// fails as the partition did.
func (c *Client) leaseDeferredParts(ctx context.Context, p *store.LeaseDeferredParams, n int) ([]sluicetype.Leased, error) {
	groups, err := groupAllSeqs(p.Seqs, n)
	if err != nil {
		return nil, fmt.Errorf("sluice: receive deferred: %w", err)
	}
	out := make([]sluicetype.Leased, len(p.Seqs))
	var taken []sluicetype.Receipt
	for _, g := range groups {
		gp := *p
		gp.Queue, gp.Seqs = partitionQueue(p.Queue, g.part), g.seqs
		ls, err := c.st.LeaseDeferred(ctx, &gp)
		if err != nil {
			if len(taken) > 0 {
				_, _ = c.settleParts(ctx, &store.SettleParams{Queue: p.Queue, Action: store.Release, Receipts: taken}, false)
			}
			return nil, err
		}
		publicLeased(g.part, ls)
		for k, i := range g.indexes {
			out[i] = ls[k]
			taken = append(taken, ls[k].Receipt)
		}
	}
	return out, nil
}

// watch is a watch of a queue's partitions.
type watch struct {
	// c signals a wake-up of any partition; parts has bit p set for each
	// partition p woken since it was last swapped to 0.
	c     <-chan struct{}
	parts *atomic.Uint32
	stop  func()
}

// watch watches the n partitions of a queue.
func (c *Client) watch(queue string, n int) watch {
	if n == 1 {
		woken, stop := c.st.WatchQueue(queue)
		return watch{c: woken, parts: new(atomic.Uint32), stop: stop}
	}
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	parts := new(atomic.Uint32)
	stops := make([]func(), n)
	for p := range n {
		woken, stop := c.st.WatchQueue(partitionQueue(queue, p))
		stops[p] = stop
		go func() {
			for {
				select {
				case <-done:
					return
				case <-woken:
					parts.Or(1 << p)
					select {
					case out <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	return watch{c: out, parts: parts, stop: func() {
		close(done)
		for _, stop := range stops {
			stop()
		}
	}}
}
