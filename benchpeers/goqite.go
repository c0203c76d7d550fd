package main

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"time"

	"github.com/maragudk/goqite"
	"github.com/sluicehq/sluice/store/sqlite"
)

// goqitePoll is how long an idle goqite consumer waits before it polls
// again: goqite has no wake-up, so it bounds the send-to-handler latency.
// (goqite's ReceiveAndWait waits this long before every receive, which
// would cap a consumer at 100 a second; the consumers receive at once
// while messages come.)
const goqitePoll = 10 * time.Millisecond

// goqiteQueue is goqite on a fresh SQLite file with the connection
// settings sluice uses (WAL, busy_timeout, the same synchronous setting)
// on the same driver (modernc.org/sqlite), and one connection, SQLite's
// one writer at a time (every goqite call writes).
type goqiteQueue struct {
	db *sql.DB
	q  *goqite.Queue
}

func openGoqite(ctx context.Context, e *env) (queuePeer, error) {
	db, err := openSQLite(filepath.Join(e.dir, "goqite.db"), e.sqliteSync)
	if err != nil {
		return nil, err
	}
	if err := goqite.Setup(ctx, db); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &goqiteQueue{db: db, q: goqite.New(goqite.NewOpts{DB: db, Name: "peers", Timeout: 5 * time.Minute})}, nil
}

// openSQLite opens path with sluice's pragmas and one connection.
func openSQLite(path, sync string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", sqlite.PragmaDSN(path, sqlite.ConnOptions{Synchronous: sync}))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// send sends one message, or a batch as SendTx calls in one transaction
// (goqite has no batch call).
func (g *goqiteQueue) send(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		return g.q.Send(ctx, goqite.Message{Body: bodies[0]})
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, b := range bodies {
		if err := g.q.SendTx(ctx, tx, goqite.Message{Body: b}); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// consume runs consumers that receive one message at a time (goqite's
// only receive), handle it and delete it.
func (g *goqiteQueue) consume(ctx context.Context, consumers int, handle func([]byte)) error {
	var wg sync.WaitGroup
	errs := make([]error, consumers)
	for i := range consumers {
		wg.Go(func() {
			for {
				m, err := g.q.Receive(ctx)
				switch {
				case err == nil && m == nil:
					select {
					case <-time.After(goqitePoll):
					case <-ctx.Done():
						err = ctx.Err()
					}
				case err == nil:
					handle(m.Body)
					err = g.q.Delete(ctx, m.ID)
				}
				if err != nil {
					if ctx.Err() == nil {
						errs[i] = err
					}
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (g *goqiteQueue) close(context.Context) error { return g.db.Close() }
