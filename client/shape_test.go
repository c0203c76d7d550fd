package client_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/storetest"
)

// The same code, written against sluice.API, runs on the library and
// through a server, on every backend.
func TestOneShape(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			lib, remote := libraryAndRemote(t, kind)
			t.Run("library", func(t *testing.T) { useAPI(t, lib, "lib") })
			t.Run("remote", func(t *testing.T) { useAPI(t, remote, "remote") })
		})
	}
}

// libraryAndRemote returns a library client of a fresh tenant on the
// kind's database, and a network client of a server in front of it.
func libraryAndRemote(t *testing.T, kind string) (*sluice.Client, *client.Client) {
	t.Helper()
	b := shared.Backend(t, kind)
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	lib, err := sluice.NewClient(b, &sluice.Options{Service: "t-" + hex.EncodeToString(id), Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Client: lib, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	remote, err := client.New("http://"+srv.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remote.Close() })
	return lib, remote
}

// useAPI sends, receives, holds a session and checks the factories'
// errors through api alone, on queues named after prefix.
func useAPI(t *testing.T, api sluice.API, prefix string) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	queue, carts := prefix+"-orders", prefix+"-carts"
	if _, err := api.CreateQueue(ctx, queue, nil); err != nil {
		t.Fatal(err)
	}
	s, err := api.MessageSender(queue)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, &sluice.Message{Body: []byte("one pizza")}); err != nil {
		t.Fatal(err)
	}
	// The receiver names its entity canonically, whatever the case given.
	r, err := api.MessageReceiver(prefix+"-ORDERS", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Entity() != queue {
		t.Errorf("Entity() = %q, want %q", r.Entity(), queue)
	}
	msgs, err := r.Receive(ctx, 10)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "one pizza" {
		t.Fatalf("Receive = %v, %v; want one pizza", msgs, err)
	}
	if err := r.Complete(ctx, msgs[0]); err != nil {
		t.Fatal(err)
	}
	if st, err := api.GetQueueStats(ctx, queue); err != nil || st.Active != 0 {
		t.Errorf("stats after Complete = %+v, %v; want none active", st, err)
	}

	if _, err := api.CreateQueue(ctx, carts, &sluice.QueueProperties{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	cs, err := api.MessageSender(carts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Send(ctx, &sluice.Message{SessionID: "alice", Body: []byte("apples")}); err != nil {
		t.Fatal(err)
	}
	held, err := api.AcceptNextMessageSession(ctx, carts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.SetSessionState(ctx, []byte("checking out")); err != nil {
		t.Fatal(err)
	}
	// Another handle on the same lock, as a later command resumes it.
	resumed, err := api.ResumeMessageSession(carts, held.SessionID(), held.LockToken(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if state, err := resumed.SessionState(ctx); err != nil || string(state) != "checking out" {
		t.Errorf("resumed SessionState = %q, %v", state, err)
	}
	msgs, err = resumed.Receive(ctx, 10)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "apples" {
		t.Fatalf("session Receive = %v, %v; want apples", msgs, err)
	}
	if err := resumed.Complete(ctx, msgs[0]); err != nil {
		t.Fatal(err)
	}
	if err := held.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := api.AcceptMessageSession(ctx, carts, "alice", nil); err != nil {
		t.Errorf("AcceptMessageSession after Close: %v", err)
	}

	if api.StreamEventProcessor(nil) == nil {
		t.Error("StreamEventProcessor(nil) = nil")
	}
	checkFactoryErrors(t, api)
}

// checkFactoryErrors checks that a factory that fails returns a nil
// interface (not one holding a nil pointer) and a typed error.
func checkFactoryErrors(t *testing.T, api sluice.API) {
	ctx := t.Context()
	if s, err := api.MessageSender(""); s != nil || !errors.Is(err, sluice.ErrInvalidName) {
		t.Errorf("MessageSender(\"\") = %v, %v; want nil, ErrInvalidName", s, err)
	}
	if r, err := api.MessageReceiver("q", &sluice.ReceiverOptions{SubQueue: 99}); r != nil || !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Errorf("MessageReceiver of sub-queue 99 = %v, %v; want nil, ErrInvalidArgument", r, err)
	}
	if s, err := api.ResumeMessageSession("q", "s", "not a token", nil); s != nil || !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Errorf("ResumeMessageSession with a bad token = %v, %v; want nil, ErrInvalidArgument", s, err)
	}
	if s, err := api.AcceptMessageSession(ctx, "no-such-queue", "s", nil); s != nil || !errors.Is(err, sluice.ErrEntityNotFound) {
		t.Errorf("AcceptMessageSession of a missing queue = %v, %v; want nil, ErrEntityNotFound", s, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if s, err := api.AcceptNextMessageSession(short, "no-such-queue", nil); s != nil || err == nil {
		t.Errorf("AcceptNextMessageSession of a missing queue = %v, %v; want nil and an error", s, err)
	}
}
