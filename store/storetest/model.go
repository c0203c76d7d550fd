package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var modelTests = []suiteTest{
	{"Queue", testQueueModel},
}

// modelMsg is a message of the model queue.
type modelMsg struct {
	payload string
	dc      int
	leased  bool
	receipt sluicetype.Receipt // of the current lease, when leased
}

// modelDead is a dead letter of the model queue.
type modelDead struct {
	payload string
	dc      int
	reason  string
}

// queueModel is what a queue should hold. Leases never expire in it: the
// test leases for far longer than it runs.
type queueModel struct {
	ctx      context.Context
	st       store.Store
	q        string
	maxDC    int
	next     int64 // the next sequence number
	payloads int
	msgs     map[int64]*modelMsg
	dead     map[int64]*modelDead
	receipts []sluicetype.Receipt // every receipt handed out, most of them stale by now
}

// testQueueModel runs random sequences of queue operations, each on a fresh
// queue, against the backend and against queueModel, and compares them
// after every step.
func testQueueModel(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := &queueModel{
			ctx: ctx, st: st, next: 1,
			maxDC: rapid.IntRange(1, 4).Draw(rt, "maxDeliveryCount"),
			msgs:  map[int64]*modelMsg{},
			dead:  map[int64]*modelDead{},
		}
		m.q = "model-" + randHex(6)
		if err := st.CreateQueue(ctx, &store.QueueSettings{Name: m.q, MaxDeliveryCount: m.maxDC}); err != nil {
			rt.Fatalf("CreateQueue: %v", err)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"Enqueue":     m.enqueue,
			"Lease":       m.lease,
			"Settle":      m.settle,
			"Peek":        m.peek,
			"DeadLetters": m.checkDead,
			"Resubmit":    m.resubmit,
			"Stats":       m.stats,
		})
		// A last full comparison, and the queue goes so the tenant stays
		// small.
		m.peekAt(rt, 0, store.DefaultMaxBatch)
		m.checkDead(rt)
		if err := st.DeleteQueue(ctx, m.q); err != nil {
			rt.Fatalf("DeleteQueue: %v", err)
		}
	})
}

func (m *queueModel) enqueue(rt *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(rt, "n")
	ms := make([]store.NewMessage, n)
	for i := range ms {
		m.payloads++
		ms[i] = msg(fmt.Sprintf("m%d", m.payloads))
	}
	seqs, err := m.st.Enqueue(m.ctx, &store.EnqueueParams{Queue: m.q, Messages: ms})
	if err != nil {
		rt.Fatalf("Enqueue: %v", err)
	}
	want := span(m.next, m.next+int64(n)-1)
	if !slices.Equal(seqs, want) {
		rt.Fatalf("Enqueue returned %v, want %v", seqs, want)
	}
	for i, s := range seqs {
		m.msgs[s] = &modelMsg{payload: string(ms[i].Payload)}
	}
	m.next += int64(n)
}

// sorted returns the model's message sequence numbers in order.
func (m *queueModel) sorted() []int64 {
	s := make([]int64, 0, len(m.msgs))
	for seq := range m.msgs {
		s = append(s, seq)
	}
	slices.Sort(s)
	return s
}

func (m *queueModel) lease(rt *rapid.T) {
	max := rapid.IntRange(1, 4).Draw(rt, "max")
	var want []int64
	for _, s := range m.sorted() {
		if !m.msgs[s].leased && len(want) < max {
			want = append(want, s)
		}
	}
	ls, err := m.st.Lease(m.ctx, &store.LeaseParams{Queue: m.q, Max: max, Visibility: long})
	if err != nil {
		rt.Fatalf("Lease: %v", err)
	}
	if got := leasedSeqs(ls); !slices.Equal(got, want) && len(got)+len(want) > 0 {
		rt.Fatalf("Lease(max %d) returned %v, want %v", max, got, want)
	}
	for _, l := range ls {
		x := m.msgs[l.Seq]
		x.dc++
		if l.DeliveryCount != x.dc || string(l.Payload) != x.payload {
			rt.Fatalf("Lease: seq %d with DeliveryCount %d payload %q, want %d and %q", l.Seq, l.DeliveryCount, l.Payload, x.dc, x.payload)
		}
		if slices.Contains(m.receipts, l.Receipt) {
			rt.Fatalf("Lease: receipt %+v handed out twice", l.Receipt)
		}
		x.leased, x.receipt = true, l.Receipt
		m.receipts = append(m.receipts, l.Receipt)
	}
}

func (m *queueModel) settle(rt *rapid.T) {
	if len(m.receipts) == 0 {
		rt.Skip("no receipts yet")
	}
	rs := rapid.SliceOfNDistinct(rapid.SampledFrom(m.receipts), 1, 3,
		func(r sluicetype.Receipt) int64 { return r.Seq }).Draw(rt, "receipts")
	if rapid.Bool().Draw(rt, "withUnknown") {
		rs = append(rs, sluicetype.Receipt{Seq: m.next + 10, Token: rs[0].Token})
	}
	p := store.SettleParams{
		Queue:    m.q,
		Action:   rapid.SampledFrom([]store.SettleAction{store.Complete, store.Abandon, store.DeadLetter, store.Extend}).Draw(rt, "action"),
		Receipts: rs,
	}
	switch p.Action {
	case store.DeadLetter:
		p.Reason, p.Description = "model", "dead-lettered by the model test"
	case store.Extend:
		p.Extension = long
	}
	res, err := m.st.Settle(m.ctx, &p)
	if err != nil {
		rt.Fatalf("Settle(%s): %v", p.Action, err)
	}
	if len(res) != len(rs) {
		rt.Fatalf("Settle returned %d results for %d receipts", len(res), len(rs))
	}
	for i, r := range rs {
		x := m.msgs[r.Seq]
		valid := x != nil && x.leased && x.receipt == r
		if !valid {
			if !errors.Is(res[i].Err, sluicetype.ErrLockLost) {
				rt.Fatalf("Settle(%s) with stale receipt %+v: %v, want ErrLockLost", p.Action, r, res[i].Err)
			}
			continue
		}
		if res[i].Err != nil {
			rt.Fatalf("Settle(%s) with valid receipt %+v: %v", p.Action, r, res[i].Err)
		}
		switch p.Action {
		case store.Complete:
			delete(m.msgs, r.Seq)
		case store.Abandon:
			if x.dc >= m.maxDC {
				delete(m.msgs, r.Seq)
				m.dead[r.Seq] = &modelDead{payload: x.payload, dc: x.dc, reason: sluicetype.ReasonMaxDeliveryCountExceeded}
			} else {
				x.leased = false
			}
		case store.DeadLetter:
			delete(m.msgs, r.Seq)
			m.dead[r.Seq] = &modelDead{payload: x.payload, dc: x.dc, reason: "model"}
		case store.Extend:
			if res[i].LockedUntil.IsZero() {
				rt.Fatalf("Extend returned no LockedUntil")
			}
		}
	}
}

func (m *queueModel) peek(rt *rapid.T) {
	m.peekAt(rt, rapid.Int64Range(0, m.next+1).Draw(rt, "from"), rapid.IntRange(1, 5).Draw(rt, "max"))
}

func (m *queueModel) peekAt(rt *rapid.T, from int64, max int) {
	got, err := m.st.Peek(m.ctx, &store.PeekParams{Queue: m.q, FromSeq: from, Max: max})
	if err != nil {
		rt.Fatalf("Peek: %v", err)
	}
	var want []int64
	for _, s := range m.sorted() {
		if s >= from && len(want) < max {
			want = append(want, s)
		}
	}
	if g := messageSeqs(got); !slices.Equal(g, want) && len(g)+len(want) > 0 {
		rt.Fatalf("Peek(from %d, max %d) = %v, want %v", from, max, g, want)
	}
	for _, g := range got {
		x := m.msgs[g.Seq]
		state := sluicetype.StateReady
		if x.leased {
			state = sluicetype.StateLeased
		}
		if string(g.Payload) != x.payload || g.DeliveryCount != x.dc || g.State != state {
			rt.Fatalf("Peek: seq %d payload %q DeliveryCount %d state %v, want %q, %d, %v", g.Seq, g.Payload, g.DeliveryCount, g.State, x.payload, x.dc, state)
		}
	}
}

func (m *queueModel) checkDead(rt *rapid.T) {
	got, err := m.st.PeekDeadLetters(m.ctx, &store.PeekParams{Queue: m.q, Max: store.DefaultMaxBatch})
	if err != nil {
		rt.Fatalf("PeekDeadLetters: %v", err)
	}
	want := make([]int64, 0, len(m.dead))
	for s := range m.dead {
		want = append(want, s)
	}
	slices.Sort(want)
	if g := deadSeqs(got); !slices.Equal(g, want) && len(g)+len(want) > 0 {
		rt.Fatalf("PeekDeadLetters = %v, want %v", g, want)
	}
	for _, g := range got {
		x := m.dead[g.Seq]
		if string(g.Payload) != x.payload || g.DeliveryCount != x.dc || g.Reason != x.reason {
			rt.Fatalf("dead letter %d: payload %q DeliveryCount %d reason %q, want %q, %d, %q", g.Seq, g.Payload, g.DeliveryCount, g.Reason, x.payload, x.dc, x.reason)
		}
	}
}

func (m *queueModel) resubmit(rt *rapid.T) {
	var dead []int64
	for s := range m.dead {
		dead = append(dead, s)
	}
	slices.Sort(dead)
	var seqs []int64
	if len(dead) > 0 {
		seqs = rapid.SliceOfNDistinct(rapid.SampledFrom(dead), 1, 3, rapid.ID[int64]).Draw(rt, "seqs")
	}
	// Sometimes a sequence number that names no dead letter: a live
	// message's, or one never used.
	unknown := len(seqs) == 0 || rapid.IntRange(0, 3).Draw(rt, "unknown") == 0
	if unknown {
		bad := m.next + 5
		if live := m.sorted(); len(live) > 0 && rapid.Bool().Draw(rt, "live") {
			bad = rapid.SampledFrom(live).Draw(rt, "liveSeq")
		}
		seqs = append(seqs, bad)
	}
	got, err := m.st.ResubmitDeadLetters(m.ctx, &store.ResubmitParams{Queue: m.q, Seqs: seqs})
	if unknown {
		if !errors.Is(err, sluicetype.ErrMessageNotFound) {
			rt.Fatalf("ResubmitDeadLetters(%v) with a seq naming no dead letter: %v, want ErrMessageNotFound", seqs, err)
		}
		return
	}
	if err != nil {
		rt.Fatalf("ResubmitDeadLetters(%v): %v", seqs, err)
	}
	want := span(m.next, m.next+int64(len(seqs))-1)
	if !slices.Equal(got, want) {
		rt.Fatalf("ResubmitDeadLetters(%v) = %v, want %v", seqs, got, want)
	}
	for i, s := range seqs {
		m.msgs[got[i]] = &modelMsg{payload: m.dead[s].payload}
		delete(m.dead, s)
	}
	m.next += int64(len(seqs))
}

func (m *queueModel) stats(rt *rapid.T) {
	got, err := m.st.QueueStats(m.ctx, m.q)
	if err != nil {
		rt.Fatalf("QueueStats: %v", err)
	}
	var want store.QueueStats
	for _, x := range m.msgs {
		if x.leased {
			want.InFlight++
		} else {
			want.Active++
		}
	}
	want.DeadLettered = int64(len(m.dead))
	got.OldestAge, got.OldestDeferredAge = 0, 0
	if got != want {
		rt.Fatalf("QueueStats = %+v, want %+v", got, want)
	}
}
