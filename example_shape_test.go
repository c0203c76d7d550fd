package sluice_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice"
)

// Code written against sluice.API runs on the library, as here, and
// through a server with the network client: only the constructor changes
// (client.New(url, nil) instead of sluice.Open).
func ExampleAPI() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sluice.Open(ctx, filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	if err := greet(ctx, c); err != nil {
		panic(err)
	}
	// Output: hello
}

// greet sends a message to a queue of its own and receives it, through
// whichever client it is given.
func greet(ctx context.Context, api sluice.API) error {
	if _, err := api.CreateQueue(ctx, "greetings", nil); err != nil {
		return err
	}
	s, err := api.MessageSender("greetings")
	if err != nil {
		return err
	}
	if _, err := s.Send(ctx, &sluice.Message{Body: []byte("hello")}); err != nil {
		return err
	}
	r, err := api.MessageReceiver("greetings", nil)
	if err != nil {
		return err
	}
	msgs, err := r.Receive(ctx, 1)
	if err != nil {
		return err
	}
	fmt.Println(string(msgs[0].Body))
	return r.Complete(ctx, msgs[0])
}
