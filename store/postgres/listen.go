package postgres

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/backoff"
	"github.com/sluicehq/sluice/store/internal/engine"
)

// channel is the LISTEN/NOTIFY channel of the Notify query.
const channel = "sluice"

// reconnectBackoff spaces the listener's attempts to reconnect.
var reconnectBackoff = backoff.Policy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: true}

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
	for {
		if conn == nil {
			conn = l.reconnect()
			if conn == nil {
				return
			}
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

// reconnect opens a listening connection again, with backoff between
// attempts; nil when the listener stops first.
func (l *listener) reconnect() *pgx.Conn {
	var conn *pgx.Conn
	err := backoff.Retry(l.ctx, reconnectBackoff, func(attempt int) bool {
		c, err := listen(l.ctx, l.cc)
		if err != nil {
			if l.ctx.Err() == nil {
				l.log.Warn("sluice: postgres: listener cannot reconnect; retrying", "attempt", attempt, "err", err)
			}
			return l.ctx.Err() != nil
		}
		conn = c
		return true
	})
	if err != nil || conn == nil {
		return nil
	}
	l.log.Info("sluice: postgres: listener reconnected")
	return conn
}

// closeConn closes a connection, giving the server a moment to hear the
// goodbye.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
