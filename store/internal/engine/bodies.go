package engine

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Shared bodies. A message sent to a topic is stored as a copy in every
// subscription it reaches (and wherever those forward it): 900 KB to 200
// subscriptions would be 175 MB in one transaction. So a payload of at
// least sharedBodyMin bytes that two or more copies of one send carry is
// stored once, in sluice_bodies, written in the transaction that writes
// the copies; each copy holds an empty payload and the body's id, and
// every read of a message or dead letter takes the payload from there.
//
// The copies of one sent message share its payload's memory (the router
// copies the message, not its bytes), and that is how they are found: by
// the payload's address and length, within one tenant. Two sends of one
// group that were given the same slice share a body too, which is right
// as well: their bytes are the same.
//
// A body lives while a message or dead letter refers to it. Nothing
// counts references (every delete path would have to): eviction passes
// delete, at most once an interval per tenant and process, a bounded
// batch of the bodies nothing refers to any more.

// sharedBodyMin is the smallest payload stored once for its copies: below
// it the copies cost less than the body's row and lookups.
const sharedBodyMin = 4 << 10

// bodyKey names a payload's memory within a tenant.
type bodyKey struct {
	t store.Tenant
	p *byte
	n int
}

func keyOf(t store.Tenant, payload []byte) (bodyKey, bool) {
	if len(payload) < sharedBodyMin {
		return bodyKey{}, false
	}
	return bodyKey{t, &payload[0], len(payload)}, true
}

// carriers is a large payload and how many messages carry it.
type carriers struct {
	payload []byte
	n       int
}

// sharedPayloads counts the messages of batches that carry each large
// payload.
func sharedPayloads(t store.Tenant, batches []store.EnqueueParams) map[bodyKey]*carriers {
	var out map[bodyKey]*carriers
	for b := range batches {
		for i := range batches[b].Messages {
			payload := batches[b].Messages[i].Payload
			k, ok := keyOf(t, payload)
			if !ok {
				continue
			}
			if out == nil {
				out = make(map[bodyKey]*carriers)
			}
			if c := out[k]; c != nil {
				c.n++
			} else {
				out[k] = &carriers{payload: payload, n: 1}
			}
		}
	}
	return out
}

// allSize is the size of an EnqueueAll's messages, with each shared
// payload counted once: what its transaction writes.
func allSize(t store.Tenant, p *store.EnqueueAllParams) int {
	n := 0
	for _, b := range p.Batches {
		for i := range b.Messages {
			n += b.Messages[i].MessageSize()
		}
	}
	for k, c := range sharedPayloads(t, p.Batches) {
		n -= (c.n - 1) * k.n
	}
	return n
}

// shareBodies stores once each large payload that two or more of the
// copies an EnqueueAll keeps carry, in gt, and sends the children holding
// them down the general path, whose inserts write body ids.
func (e *Engine) shareBodies(ctx context.Context, gt *groupTx, alls []allReq) error {
	for _, a := range alls {
		kept := a.kept()
		batches := make([]store.EnqueueParams, len(kept))
		for i, ch := range kept {
			batches[i] = *ch.enq
		}
		t := a.r.t
		for k, c := range sharedPayloads(t, batches) {
			if _, ok := gt.bodies[k]; c.n < 2 || ok {
				continue
			}
			id, err := e.insertBody(ctx, gt.tx, t, c.payload)
			if err != nil {
				return err
			}
			if gt.bodies == nil {
				gt.bodies = make(map[bodyKey]int64)
			}
			gt.bodies[k] = id
		}
		for _, ch := range kept {
			for i := range ch.enq.Messages {
				if _, ok := gt.bodyOf(t, ch.enq.Messages[i].Payload); ok {
					ch.needsTx = true
					break
				}
			}
		}
	}
	return nil
}

func (e *Engine) insertBody(ctx context.Context, tx querier, t store.Tenant, payload []byte) (int64, error) {
	if e.d.Capabilities.LastInsertID {
		st, err := e.stmt(ctx, tx, qInsertBody)
		if err != nil {
			return 0, err
		}
		res, err := st.ExecContext(ctx, t.Service, t.Provider, payload)
		if err != nil {
			return 0, fmt.Errorf("InsertBody: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return 0, fmt.Errorf("InsertBody: %w", err)
		}
		return id, nil
	}
	var id int64
	if err := e.queryRow(ctx, tx, qInsertBody, []any{t.Service, t.Provider, payload}, &id); err != nil {
		return 0, fmt.Errorf("InsertBody: %w", err)
	}
	return id, nil
}

// bodyOf returns the id of the stored body of payload, if gt stored one.
func (g *groupTx) bodyOf(t store.Tenant, payload []byte) (int64, bool) {
	k, ok := keyOf(t, payload)
	if !ok || g.bodies == nil {
		return 0, false
	}
	id, ok := g.bodies[k]
	return id, ok
}

// share makes row refer to the stored body of its payload, if gt stored
// one.
func (g *groupTx) share(t store.Tenant, row *messageRow, payload []byte) {
	if id, ok := g.bodyOf(t, payload); ok {
		row.BodyID = &id
		row.Payload = nil
	}
}

// bodySweeps remembers, per tenant, when this process last swept the
// tenant's bodies and where the next sweep starts.
type bodySweeps struct {
	mu    sync.Mutex
	state map[store.Tenant]sweepState
}

type sweepState struct {
	last  time.Time
	after int64
}

// due reports whether a sweep of t's bodies is due, every interval, and
// if so records it as begun now.
func (s *bodySweeps) due(t store.Tenant, interval time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	st, ok := s.state[t]
	if ok && now.Sub(st.last) < interval {
		return false
	}
	if s.state == nil {
		s.state = make(map[store.Tenant]sweepState)
	}
	st.last = now
	s.state[t] = st
	return true
}

func (s *bodySweeps) cursor(t store.Tenant) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state[t].after
}

func (s *bodySweeps) advance(t store.Tenant, after int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		s.state = make(map[store.Tenant]sweepState)
	}
	st := s.state[t]
	st.after = after
	s.state[t] = st
}

// sweepBodies looks at up to limit bodies of t, from where the last sweep
// stopped (around again after the last), and deletes those nothing refers
// to: each sweep costs O(limit), however many bodies are alive. (Were the
// transaction to roll back, the next sweep of the range finds the same.)
func (e *Engine) sweepBodies(ctx context.Context, tx *sql.Tx, t store.Tenant, limit int) (int64, error) {
	after := e.sweeps.cursor(t)
	rows, err := e.query(ctx, tx, qSelectBodies, t.Service, t.Provider, after, limit)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var orphans []int64
	seen := 0
	for rows.Next() {
		var id int64
		var orphan bool
		if err := rows.Scan(&id, &orphan); err != nil {
			return 0, fmt.Errorf("SelectBodies: %w", err)
		}
		seen++
		after = id
		if orphan {
			orphans = append(orphans, id)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("SelectBodies: %w", err)
	}
	rows.Close()
	if seen < limit {
		after = 0 // the end: the next sweep starts again from the first
	}
	e.sweeps.advance(t, after)
	if len(orphans) == 0 {
		return 0, nil
	}
	return e.exec(ctx, tx, qDeleteBodies, t.Service, t.Provider, e.d.IntList(orphans))
}
