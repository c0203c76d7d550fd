package engine

import (
	"fmt"
	"hash/maphash"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// Every request of one entity goes to one pipeline; producers' writes go
// to the first half of the pipelines, consumers' to the rest, so a queue's
// sends and its receives never share one; entities spread over every
// pipeline of their half.
func TestPipelineRouting(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8} {
		c := &committer{pipes: make([]*pipe, n), seed: maphash.MakeSeed()}
		index := make(map[chan *writeReq]int)
		for i := range c.pipes {
			c.pipes[i] = &pipe{reqs: make(chan *writeReq)}
			index[c.pipes[i].reqs] = i
		}
		tn := store.Tenant{Service: "s", Provider: "p"}
		used := make(map[int]bool)
		for q := range 64 {
			name := fmt.Sprint("q", q)
			send := index[c.pipeline(&writeReq{t: tn, enq: &store.EnqueueParams{Queue: name}})]
			all := index[c.pipeline(&writeReq{t: tn, all: &store.EnqueueAllParams{Batches: []store.EnqueueParams{{Queue: name}, {Queue: "other"}}}})]
			lease := index[c.pipeline(&writeReq{t: tn, lease: &store.LeaseParams{Queue: name}})]
			settle := index[c.pipeline(&writeReq{t: tn, settle: &store.SettleParams{Queue: name}})]
			if all != send || settle != lease {
				t.Fatalf("%d pipelines, queue %s: send %d, send to several %d, lease %d, settle %d: want one pipeline for sends, one for receives", n, name, send, all, lease, settle)
			}
			if send == lease {
				t.Fatalf("%d pipelines, queue %s: sends and receives share pipeline %d", n, name, send)
			}
			if sends := (n + 1) / 2; send >= sends || lease < sends {
				t.Fatalf("%d pipelines, queue %s: send %d, lease %d: want sends below %d, receives from it", n, name, send, lease, sends)
			}
			used[send], used[lease] = true, true
			again := index[c.pipeline(&writeReq{t: tn, enq: &store.EnqueueParams{Queue: name}})]
			if again != send {
				t.Fatalf("queue %s: sends routed to %d, then %d", name, send, again)
			}
			other := index[c.pipeline(&writeReq{t: store.Tenant{Service: "s2", Provider: "p"}, enq: &store.EnqueueParams{Queue: name}})]
			used[other] = true
		}
		for p := range 16 {
			if a := index[c.pipeline(&writeReq{t: tn, app: &store.AppendParams{Partition: int32(p)}})]; a >= (n+1)/2 {
				t.Fatalf("%d pipelines, partition %d: appends routed to %d, a consumers' pipeline", n, p, a)
			}
		}
		for p := range 16 {
			a := index[c.pipeline(&writeReq{t: tn, app: &store.AppendParams{Partition: int32(p)}})]
			if b := index[c.pipeline(&writeReq{t: tn, app: &store.AppendParams{Partition: int32(p)}})]; a != b {
				t.Fatalf("partition %d: appends routed to %d, then %d", p, a, b)
			}
		}
		if len(used) != n {
			t.Fatalf("128 queues' sends and receives used %d of %d pipelines", len(used), n)
		}
	}
}
