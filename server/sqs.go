package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/server/internal/sqs"
)

// newSQS builds the handler of Config.SQSAddr: the SQS JSON protocol on
// the server's client, its requests signed with the server's keys and
// bounded as the API's are (a key's rate limit and MaxWaits,
// MaxReceiveWait, MaxRequestBytes, the server's shutdown).
func (s *Server) newSQS() (*sqs.Handler, http.Handler, error) {
	cfg := sqs.Config{Client: s.c, Context: s.stopping, MaxRequestBytes: s.cfg.MaxRequestBytes, Logger: s.log, Wait: s.sqsWait}
	if s.keys != nil {
		cfg.Key = s.sqsKey
	}
	h, err := sqs.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	if s.keys == nil && !s.cfg.Insecure {
		listenHost, _, _ := net.SplitHostPort(s.cfg.SQSAddr)
		return h, loopbackHostsOnly(h, listenHost), nil
	}
	return h, h, nil
}

// sqsKey is the key an SQS request's access key id names: a key's Name.
func (s *Server) sqsKey(id string) (sqs.Key, bool) {
	for _, k := range s.keys.keys {
		if k.Name == id {
			return sqsKey{k}, true
		}
	}
	return nil, false
}

// sqsWait bounds an SQS long poll as the API's receives are bounded.
func (s *Server) sqsWait(ctx context.Context, k sqs.Key, d time.Duration) (context.Context, context.CancelFunc, error) {
	if k, ok := k.(sqsKey); ok {
		ctx = context.WithValue(ctx, keyCtx{}, k.authKey)
	}
	wctx, cancel, err := s.waitContext(ctx, d)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", err.Error(), sqs.ErrThrottled)
	}
	return wctx, cancel, nil
}

// sqsKey is a server key as the SQS endpoint sees it.
type sqsKey struct{ *authKey }

func (k sqsKey) Secret() string { return k.Token }

func (k sqsKey) Allows(p sqs.Permission, queue string) bool {
	if p == 0 {
		return k.allows(Send, queue) || k.allows(Receive, queue) || k.allows(Manage, queue)
	}
	var a Action
	switch p {
	case sqs.Send:
		a = Send
	case sqs.Receive:
		a = Receive
	case sqs.Manage:
		a = Manage
	default:
		return false
	}
	return k.allows(a, queue)
}

func (k sqsKey) Admit() error {
	if k.limiter != nil && !k.limiter.Allow() {
		return fmt.Errorf("key %q is over its rate limit of %g calls a second: %w", k.Name, k.RatePerSecond, sqs.ErrThrottled)
	}
	return nil
}
