package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// processOrders sends three orders to a new queue and runs a processor
// over them until each was handled, through api alone: the same code for
// the library and the network client.
func processOrders(ctx context.Context, api sluice.API, queue string) error {
	if _, err := api.CreateQueue(ctx, queue, nil); err != nil {
		return err
	}
	s, err := api.MessageSender(queue)
	if err != nil {
		return err
	}
	for _, order := range []string{"pizza", "pasta", "salad"} {
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte(order)}); err != nil {
			return err
		}
	}
	handled := make(chan string)
	p, err := api.MessageProcessor(queue, func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
		if string(m.Body) == "salad" {
			// The handler may settle a message itself; the processor
			// then leaves it alone.
			defer func() { handled <- "salad (set aside)" }()
			return r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: "out of salad"})
		}
		handled <- string(m.Body)
		return nil // completes the message
	}, &sluice.ProcessorOptions{MessageMiddleware: []sluice.MessageMiddleware{sluice.LoggingMessage(nil)}})
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	for range 3 {
		fmt.Println(queue+":", <-handled)
	}
	return p.Stop(ctx)
}

// The same processor code runs on the library's client, on its database,
// and on the network client, through a server.
func Example_processor() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	lib, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer lib.Close()
	srv, err := server.New(server.Config{Client: lib, Addr: "127.0.0.1:0"})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(ctx); err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())
	remote, err := client.New("http://"+srv.Addr().String(), nil)
	if err != nil {
		panic(err)
	}
	defer remote.Close()

	if err := processOrders(ctx, lib, "library"); err != nil {
		panic(err)
	}
	if err := processOrders(ctx, remote, "remote"); err != nil {
		panic(err)
	}
	// Output:
	// library: pizza
	// library: pasta
	// library: salad (set aside)
	// remote: pizza
	// remote: pasta
	// remote: salad (set aside)
}
