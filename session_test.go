package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func sessionMsg(session, body string) *sluice.Message {
	return &sluice.Message{SessionID: session, Body: []byte(body)}
}

func TestSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
		s := newSender(t, c, q)
		_, err := s.Send(ctx, &sluice.Message{Body: []byte("no session")})
		wantErr(t, "Send without a session id", err, sluice.ErrSessionRequired)
		if _, err := s.SendBatch(ctx, []*sluice.Message{sessionMsg("a", "a1"), sessionMsg("b", "b1"), sessionMsg("a", "a2")}); err != nil {
			t.Fatal(err)
		}
		_, err = newReceiver(t, c, q, sluice.PeekLock).Receive(ctx, 1)
		wantErr(t, "Receive without a session", err, sluice.ErrSessionRequired)
		// RequiresSession is fixed when the queue is created: an update
		// that does not set it keeps it.
		if info, err := c.UpdateQueue(ctx, q, sluice.QueueProperties{}); err != nil || !info.RequiresSession {
			t.Fatalf("UpdateQueue of a session queue = %+v, %v; want sessions kept", info, err)
		}

		ra, err := c.AcceptSession(ctx, q, "a", nil)
		if err != nil {
			t.Fatalf("AcceptSession(a): %v", err)
		}
		_, err = c.AcceptSession(ctx, q, "a", nil)
		wantErr(t, "a second accept of session a", err, sluice.ErrSessionCannotBeLocked)
		ms, err := ra.Receive(ctx, 10)
		if err != nil || !slices.Equal(bodies(ms), []string{"a1", "a2"}) {
			t.Fatalf("session a received %v, %v", bodies(ms), err)
		}
		for _, m := range ms {
			if err := ra.Complete(ctx, m); err != nil {
				t.Fatalf("Complete: %v", err)
			}
		}
		if got, err := ra.SessionState(ctx); got != nil || err != nil {
			t.Fatalf("new session state = %q, %v", got, err)
		}
		if err := ra.SetSessionState(ctx, []byte("checkpoint 2")); err != nil {
			t.Fatal(err)
		}

		// AcceptNextSession skips the held session a and takes b.
		rb, err := c.AcceptNextSession(ctx, q, nil)
		if err != nil || rb.SessionID() != "b" {
			t.Fatalf("AcceptNextSession = %v, %v; want session b", rb, err)
		}
		// It waits for a session to have messages, and wakes on a send.
		go func() {
			time.Sleep(200 * time.Millisecond)
			s.Send(context.Background(), sessionMsg("c", "c1"))
		}()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rc, err := c.AcceptNextSession(wctx, q, nil)
		if err != nil || rc.SessionID() != "c" {
			t.Fatalf("AcceptNextSession while all are held = %v, %v; want c after its send", rc, err)
		}
		for _, r := range []*sluice.SessionReceiver{rb, rc} {
			if err := r.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
		}
		if err := ra.Close(ctx); err != nil {
			t.Fatal(err)
		}
		again, err := c.AcceptSession(ctx, q, "a", nil)
		if err != nil {
			t.Fatalf("accept after Close: %v", err)
		}
		if got, _ := again.SessionState(ctx); string(got) != "checkpoint 2" {
			t.Fatalf("session state after Close and accept = %q", got)
		}
		if err := again.SetSessionState(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got, _ := again.SessionState(ctx); got != nil {
			t.Fatalf("state after clearing = %q", got)
		}
		// Messages received and not settled come back on Close, first.
		got, err := c.AcceptSession(ctx, q, "b", nil)
		if err != nil {
			t.Fatal(err)
		}
		if ms, _ := got.Receive(ctx, 5); len(ms) != 1 || ms[0].DeliveryCount != 1 {
			t.Fatalf("session b: %v", bodies(ms))
		}
		got.Close(ctx)
		got, _ = c.AcceptSession(ctx, q, "b", nil)
		// Closing was not a delivery: the count is 1 again.
		if ms, _ := got.Receive(ctx, 5); len(ms) != 1 || ms[0].DeliveryCount != 1 {
			t.Fatalf("session b after Close: %v", bodies(ms))
		}
	})
}

// A session lock that ends fails every operation under it with
// ErrSessionLockLost, and the session's messages go to the next holder.
// (The lock lasts 3 s: the renewal below must come, and the complete
// after it, within one on a machine busy with other tests.)
func TestSessionLockLost(t *testing.T) {
	const lock = 3 * time.Second
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true, LockDuration: lock})
		send := newSender(t, c, q)
		if _, err := send.Send(ctx, sessionMsg("s", "m")); err != nil {
			t.Fatal(err)
		}
		r, err := c.AcceptNextSession(ctx, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := r.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(lock + 300*time.Millisecond)
		err = r.Complete(ctx, ms[0])
		if !errors.Is(err, sluice.ErrSessionLockLost) || !errors.Is(err, sluice.ErrLockLost) {
			t.Fatalf("Complete after the session lock ended: %v, want ErrSessionLockLost", err)
		}
		_, err = r.Receive(ctx, 1)
		wantErr(t, "Receive after the session lock ended", err, sluice.ErrSessionLockLost)
		wantErr(t, "RenewSessionLock after it ended", r.RenewSessionLock(ctx), sluice.ErrSessionLockLost)
		_, err = r.SessionState(ctx)
		wantErr(t, "SessionState after the lock ended", err, sluice.ErrSessionLockLost)

		next, err := c.AcceptNextSession(ctx, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		again, err := next.Receive(ctx, 1)
		if err != nil || again[0].DeliveryCount != 2 {
			t.Fatalf("the next holder received %v, %v", again, err)
		}
		// Renewing keeps the lock past its duration, for the messages too.
		time.Sleep(lock * 6 / 10)
		if err := next.RenewSessionLock(ctx); err != nil {
			t.Fatalf("RenewSessionLock: %v", err)
		}
		time.Sleep(lock * 6 / 10)
		if err := next.Complete(ctx, again[0]); err != nil {
			t.Fatalf("Complete %v into a renewed %v session lock: %v", lock*12/10, lock, err)
		}
	})
}

// FIFO within sessions, exclusive holders: 100 sessions with interleaved
// sends, 8 concurrent session receivers that sometimes abandon a message
// or give a session back midway.
func TestSessionFIFO(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
		const sessions, perSession = 100, 10
		total := sessions * perSession
		go func() {
			s, _ := c.NewSender(q)
			var batch []*sluice.Message
			for i := range perSession {
				for sid := range sessions {
					batch = append(batch, sessionMsg(fmt.Sprint("s", sid), fmt.Sprintf("%d/%d", sid, i)))
					if len(batch) == 25 {
						if _, err := s.SendBatch(ctx, batch); err != nil {
							t.Errorf("SendBatch: %v", err)
							return
						}
						batch = nil
					}
				}
			}
		}()

		var (
			mu        sync.Mutex
			holder    = map[string]int{}
			next      = map[string]int{} // session -> next index expected
			completed int
			wg        sync.WaitGroup
		)
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for rctx.Err() == nil {
					r, err := c.AcceptNextSession(rctx, q, nil)
					if err != nil {
						if rctx.Err() == nil {
							t.Errorf("AcceptNextSession: %v", err)
						}
						return
					}
					id := r.SessionID()
					mu.Lock()
					if h, ok := holder[id]; ok {
						mu.Unlock()
						t.Errorf("session %s accepted by receiver %d while receiver %d holds it", id, w, h)
						return
					}
					holder[id] = w
					mu.Unlock()
					for {
						qctx, qcancel := context.WithTimeout(rctx, 150*time.Millisecond)
						ms, err := r.Receive(qctx, 1+rng.IntN(4))
						qcancel()
						if err != nil {
							break
						}
						if !process(t, rctx, r, ms, rng, &mu, next, &completed) {
							break
						}
					}
					mu.Lock()
					delete(holder, id)
					done := completed == total
					mu.Unlock()
					if err := r.Close(rctx); err != nil && rctx.Err() == nil {
						t.Errorf("Close: %v", err)
					}
					if done {
						cancel()
					}
				}
			}()
		}
		wg.Wait()
		if completed != total {
			t.Fatalf("completed %d of %d messages", completed, total)
		}
		for sid := range sessions {
			if n := next[fmt.Sprint("s", sid)]; n != perSession {
				t.Fatalf("session s%d completed up to %d of %d", sid, n, perSession)
			}
		}
	})
}

// process checks that ms continue their session in order and settles
// them: mostly completes, sometimes abandons one (it must come again
// next) or stops to give the session back. It reports whether to go on.
func process(t *testing.T, ctx context.Context, r *sluice.SessionReceiver, ms []*sluice.ReceivedMessage, rng *rand.Rand, mu *sync.Mutex, next map[string]int, completed *int) bool {
	for _, m := range ms {
		sid, idx, _ := strings.Cut(string(m.Body), "/")
		i, _ := strconv.Atoi(idx)
		mu.Lock()
		want := next["s"+sid]
		mu.Unlock()
		if i != want {
			t.Errorf("session s%s: received message %d, want %d (FIFO broken)", sid, i, want)
			return false
		}
		if rng.IntN(10) == 0 {
			// Abandon this and the rest: they must come again, in order.
			for _, rest := range ms[slices.Index(ms, m):] {
				if err := r.Abandon(ctx, rest, nil); err != nil {
					t.Errorf("Abandon: %v", err)
				}
			}
			return rng.IntN(2) == 0
		}
		if err := r.Complete(ctx, m); err != nil {
			t.Errorf("Complete: %v", err)
			return false
		}
		mu.Lock()
		next["s"+sid]++
		*completed++
		mu.Unlock()
	}
	return true
}

// FIFO holds when session locks are lost: receivers that stall past the
// session lock lose it, the session's messages go to the next holder, and
// a message is never delivered while an earlier one of its session is
// neither completed nor in flight with the same holder.
func TestSessionFIFOWithLockLoss(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true, LockDuration: time.Second})
		const sessions, perSession = 16, 8
		var batch []*sluice.Message
		for i := range perSession {
			for sid := range sessions {
				batch = append(batch, sessionMsg(fmt.Sprint("s", sid), fmt.Sprintf("%d/%d", sid, i)))
			}
		}
		if _, err := newSender(t, c, q).SendBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		var (
			mu        sync.Mutex
			completed = map[string]bool{} // "sid/i"
			total     int
			stalls    atomic.Int64
			wg        sync.WaitGroup
		)
		rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 11))
				for rctx.Err() == nil {
					r, err := c.AcceptNextSession(rctx, q, nil)
					if err != nil {
						if rctx.Err() == nil {
							t.Errorf("AcceptNextSession: %v", err)
						}
						return
					}
					inFlight := map[string]bool{}
					for rctx.Err() == nil {
						qctx, qcancel := context.WithTimeout(rctx, 100*time.Millisecond)
						ms, err := r.Receive(qctx, 3)
						qcancel()
						if err != nil {
							if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, sluice.ErrSessionLockLost) && rctx.Err() == nil {
								t.Errorf("Receive: %v", err)
							}
							break
						}
						for _, m := range ms {
							sid, idx, _ := strings.Cut(string(m.Body), "/")
							j, _ := strconv.Atoi(idx)
							mu.Lock()
							for i := range j {
								k := sid + "/" + strconv.Itoa(i)
								if !completed[k] && !inFlight[k] {
									t.Errorf("session s%s: message %d delivered (delivery %d) while %d is neither completed nor held", sid, j, m.DeliveryCount, i)
								}
							}
							mu.Unlock()
							inFlight[string(m.Body)] = true
						}
						if w < 6 && rng.IntN(3) == 0 {
							stalls.Add(1)
							time.Sleep(1300 * time.Millisecond) // stall past the lock
						}
						for _, m := range ms {
							// Recorded once the complete succeeded: a holder
							// completes only under a live lock, and the next
							// holder accepts only after it ended.
							if err := r.Complete(rctx, m); err != nil {
								if !errors.Is(err, sluice.ErrSessionLockLost) && rctx.Err() == nil {
									t.Errorf("Complete: %v", err)
								}
								break
							}
							mu.Lock()
							completed[string(m.Body)] = true
							total++
							if total == sessions*perSession {
								cancel()
							}
							mu.Unlock()
						}
					}
					r.Close(context.WithoutCancel(rctx))
				}
			}()
		}
		wg.Wait()
		if total != sessions*perSession {
			t.Fatalf("completed %d of %d", total, sessions*perSession)
		}
		if stalls.Load() == 0 {
			t.Fatal("no receiver stalled past its lock: the test tested nothing")
		}
		t.Logf("%d stalls past the session lock", stalls.Load())
	})
}

// Closing a session receiver hands its unsettled messages back without
// counting a delivery (Service Bus: a close is not a failed delivery), so
// with MaxDeliveryCount 1 the message survives any number of closes.
func TestSessionCloseIsNotADelivery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true, MaxDeliveryCount: 1})
		if _, err := newSender(t, c, q).Send(ctx, sessionMsg("s", "m")); err != nil {
			t.Fatal(err)
		}
		for round := 1; round <= 3; round++ {
			r, err := c.AcceptSession(ctx, q, "s", nil)
			if err != nil {
				t.Fatalf("round %d: AcceptSession: %v", round, err)
			}
			ms, err := r.Receive(ctx, 1)
			if err != nil || len(ms) != 1 || ms[0].DeliveryCount != 1 {
				t.Fatalf("round %d: received %v, %v; want the message on its first delivery", round, ms, err)
			}
			if err := r.Close(ctx); err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
		}
		if reasons, err := c.DeadLetterReasons(ctx, q); err != nil || len(reasons) != 0 {
			t.Fatalf("dead letters after closing sessions: %v, %v; want none", reasons, err)
		}
	})
}
