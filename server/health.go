package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// readyFresh is how long a readiness check's outcome answers /readyz.
const readyFresh = time.Second

// readiness checks that the database answers, for /readyz: at most once
// per readyFresh, however many probes ask (probes that come while it
// checks wait for that check), so that the endpoint, which asks for no
// credentials, costs the database one lookup a second at most.
type readiness struct {
	mu  sync.Mutex // held while checking
	at  time.Time  // when last checked
	err error
}

// check returns the outcome of the last check, checking again once it
// is older than readyFresh; a failed check is logged (once a check, not
// once a probe).
func (r *readiness) check(c *sluice.Client, log *slog.Logger) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at.IsZero() || time.Since(r.at) >= readyFresh {
		r.err = probe(c)
		r.at = time.Now()
		if r.err != nil {
			log.Warn("sluice: server: not ready: the database does not answer", "err", r.err)
		}
	}
	return r.err
}

// probeName is a name no entity has: its lookup reads one row of an
// index, and finds nothing.
const probeName = "sluice-readiness-probe"

// probe looks up an entity: the database answers, or not within 5 s.
func probe(c *sluice.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.GetQueue(ctx, probeName)
	if errors.Is(err, sluice.ErrEntityNotFound) {
		return nil
	}
	return err
}
