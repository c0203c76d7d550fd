package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// Calls on entities that do not exist label nothing: after more of them
// than the metrics label, a real entity is still labelled by its name,
// not "_other"; and a deleted entity's series go with it (the
// self-check's throwaway queue leaves no label behind).
func TestMetricsLabelOnlyEntitiesThatExist(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		const refused = 10050
		token := "00000000000000010000000000000001"
		var wg sync.WaitGroup
		calls := make(chan int)
		var mu sync.Mutex
		wrong := 0
		for range 8 {
			wg.Go(func() {
				for i := range calls {
					status, _ := postRaw(t, e, "MessagingService/Complete", "",
						fmt.Sprintf(`{"entity":"missing-%d","lockToken":"%s"}`, i, token))
					if status != http.StatusNotFound {
						mu.Lock()
						wrong++
						mu.Unlock()
					}
				}
			})
		}
		for i := range refused {
			calls <- i
		}
		close(calls)
		wg.Wait()
		if wrong > 0 {
			t.Fatalf("%d Completes of missing entities did not answer 404", wrong)
		}
		c := e.Remote(t, nil)
		ctx := t.Context()
		for _, q := range []string{"real", "sluice-self-check-1"} {
			if _, err := c.CreateQueue(ctx, q, nil); err != nil {
				t.Fatal(err)
			}
			snd, _ := c.NewSender(q)
			if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			r, _ := c.NewReceiver(q, nil)
			ms, err := r.Receive(ctx, 1)
			if err != nil || len(ms) != 1 {
				t.Fatalf("Receive = %v, %v", ms, err)
			}
			if err := r.Complete(ctx, ms[0]); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.DeleteQueue(ctx, "sluice-self-check-1"); err != nil {
			t.Fatal(err)
		}
		_, body := scrape(t, e, "")
		for _, want := range []string{
			`sluice_messages_sent_total{entity="real"} 1`,
			`sluice_messages_received_total{entity="real",mode="peek_lock"} 1`,
			`sluice_messages_settled_total{action="complete",entity="real"} 1`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		for _, unwanted := range []string{`entity="_other"`, `entity="missing-`, `entity="sluice-self-check-1"`} {
			if strings.Contains(body, unwanted) {
				t.Errorf("/metrics has %s", unwanted)
			}
		}
	})
}
