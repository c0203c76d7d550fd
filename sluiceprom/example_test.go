package sluiceprom_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceprom"
)

// Time a processor's handler and count how each delivery ended, on the
// registry the collector is on: here one delivery failed and its
// redelivery succeeded.
func ExampleCollector_MessageMiddleware() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sluiceprom-example")
	defer os.RemoveAll(dir)
	c, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	m := sluiceprom.New(c, nil)
	defer m.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	c.CreateQueue(ctx, "orders", nil)
	s, _ := c.NewSender("orders")
	s.Send(ctx, &sluice.Message{Body: []byte("one pizza")})

	done := make(chan struct{})
	p, _ := c.MessageProcessor("orders", func(ctx context.Context, r sluice.MessageReceiver, msg *sluice.ReceivedMessage) error {
		if msg.DeliveryCount == 1 {
			return errors.New("oven cold")
		}
		close(done)
		return nil
	}, &sluice.ProcessorOptions{MessageMiddleware: []sluice.MessageMiddleware{m.MessageMiddleware()}})
	p.Start(ctx)
	<-done
	p.Stop(ctx) // the handler, and the middleware around it, have returned

	families, _ := reg.Gather()
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "sluice_messages_handled_total":
				fmt.Println(f.GetName(), s.GetLabel()[1].GetValue(), s.GetCounter().GetValue())
			case "sluice_message_handler_seconds":
				fmt.Println(f.GetName(), "count", s.GetHistogram().GetSampleCount())
			}
		}
	}
	// Output:
	// sluice_message_handler_seconds count 2
	// sluice_messages_handled_total error 1
	// sluice_messages_handled_total ok 1
}
