package postgres

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/store/internal/engine"
)

// channel is the LISTEN/NOTIFY channel of the Notify query.
const channel = "sluice"

// Bounds of the listener's reconnect backoff.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// listener holds one dedicated connection that LISTENs on the sluice
// channel and feeds every hub key it hears to the engine's hub, so that a
// write in another process wakes this process's watchers. When the
// connection drops it reconnects with backoff; wake-ups sent meanwhile are
// lost, which watchers tolerate (they poll as well).
type listener struct {
	cc     *pgx.ConnConfig
	log    *slog.Logger
	conn   *pgx.Conn // owned by run once started
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	started bool
	once    sync.Once
}

// startListener connects and runs LISTEN before returning, so that a
// backend that Open returned hears every notification committed after.
func startListener(ctx context.Context, cc *pgx.ConnConfig, log *slog.Logger) (*listener, error) {
	cc = cc.Copy()
	conn, err := listen(ctx, cc)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	return &listener{cc: cc, log: log, conn: conn, ctx: lctx, cancel: cancel, done: make(chan struct{})}, nil
}

// listen opens a connection listening on the channel.
func listen(ctx context.Context, cc *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		closeConn(conn)
		return nil, err
	}
	return conn, nil
}

// start runs the listening loop, signalling hub.
func (l *listener) start(hub *engine.Hub) {
	l.started = true
	go l.run(hub)
}

// stop ends the loop and closes the connection, waiting for both. It is
// safe to call more than once.
func (l *listener) stop() {
	l.once.Do(func() {
		l.cancel()
		if l.started {
			<-l.done
			return
		}
		closeConn(l.conn)
	})
}

func (l *listener) run(hub *engine.Hub) {
	defer close(l.done)
	conn := l.conn
	backoff := minBackoff
	for {
		if conn == nil {
			c, err := listen(l.ctx, l.cc)
			if err != nil {
				if l.ctx.Err() != nil {
					return
				}
				l.log.Warn("sluice: postgres: listener cannot reconnect; retrying", "in", backoff, "err", err)
				select {
				case <-l.ctx.Done():
					return
				case <-time.After(backoff/2 + rand.N(backoff)):
				}
				backoff = min(backoff*2, maxBackoff)
				continue
			}
			l.log.Info("sluice: postgres: listener reconnected")
			conn, backoff = c, minBackoff
		}
		n, err := conn.WaitForNotification(l.ctx)
		if err != nil {
			closeConn(conn)
			conn = nil
			if l.ctx.Err() != nil {
				return
			}
			l.log.Warn("sluice: postgres: listener lost its connection; reconnecting", "err", err)
			continue
		}
		if n.Channel == channel {
			hub.SignalRemote(n.Payload)
		}
	}
}

// closeConn closes a connection, giving the server a moment to hear the
// goodbye.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
