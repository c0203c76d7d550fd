package stream

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// saver stores the progress of a node's agents: every ProgressInterval,
// the latest progress each agent handed it, all partitions in one
// transaction. A record then costs its append and a share of one batched
// save, rather than a save per partition.
type saver struct {
	n *Node

	mu      sync.Mutex
	pending map[int32]pendingSave
	// flushing is held while a batch is written: an agent's final save
	// takes it, so that no older batch lands after it.
	flushing sync.Mutex

	stop chan struct{}
	done chan struct{}
}

type pendingSave struct {
	a *agent
	p store.ProgressParams
}

func newSaver(n *Node) *saver {
	return &saver{n: n, pending: make(map[int32]pendingSave), stop: make(chan struct{}), done: make(chan struct{})}
}

// submit replaces the agent's pending progress.
func (s *saver) submit(a *agent, p store.ProgressParams) {
	s.mu.Lock()
	s.pending[a.partition] = pendingSave{a, p}
	s.mu.Unlock()
}

// drop forgets an agent's pending progress.
func (s *saver) drop(a *agent) {
	s.mu.Lock()
	if ps, ok := s.pending[a.partition]; ok && ps.a == a {
		delete(s.pending, a.partition)
	}
	s.mu.Unlock()
}

func (s *saver) run() {
	defer close(s.done)
	tick := time.NewTicker(s.n.cfg.ProgressInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.flush()
		case <-s.stop:
			return
		}
	}
}

// flush writes the pending progress, at most MaxBatch partitions a
// transaction, and tells each agent what became of its own.
func (s *saver) flush() {
	// Take the batch under flushing: an agent's final save, which drops
	// its pending progress and then takes flushing, comes either before
	// the batch is taken (and is not in it) or after it is written.
	s.flushing.Lock()
	defer s.flushing.Unlock()
	s.mu.Lock()
	batch := slices.Collect(maps.Values(s.pending))
	clear(s.pending)
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	for chunk := range slices.Chunk(batch, store.DefaultMaxBatch) {
		ps := make([]store.ProgressParams, len(chunk))
		for i, c := range chunk {
			ps[i] = c.p
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := s.n.st.SaveProgress(ctx, ps)
		cancel()
		for i, c := range chunk {
			o := saved{p: c.p, err: err}
			if err == nil {
				o.res = res[i]
			}
			// The newest outcome replaces one the agent has not taken yet.
			select {
			case <-c.a.savedCh:
			default:
			}
			select {
			case c.a.savedCh <- o:
			default:
			}
		}
	}
}
