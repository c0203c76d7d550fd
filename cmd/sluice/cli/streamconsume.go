package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

func opStreamRetention() *op {
	var r sluice.StreamRetention
	return &op{name: "stream retention", args: "NAMESPACE", minArgs: 1, maxArgs: 1, streams: true,
		about: "Sets how long a namespace's events stay, replacing its retention: settings not given are zero.\n" +
			"By default an event goes once every subscription is done with it.",
		flags: func(fs *flag.FlagSet) {
			fs.Var((*durationValue)(&r.MaxAge), "max-age", "keep consumed events until they are this old")
			fs.Int64Var(&r.MaxBytes, "max-bytes", 0, "keep the newest consumed events of each partition up to this many bytes of bodies")
			fs.Var((*durationValue)(&r.Expiry), "expiry", "delete events this old even when a subscription has not read them (at least --max-age; "+
				"such a subscription then faults with a retention gap)")
			fs.Var((*durationValue)(&r.Parked), "parked", "delete parked events once parked this long (default: kept until replayed)")
		},
		check: func([]string) error {
			if r.MaxBytes < 0 {
				return fmt.Errorf("--max-bytes %d: must not be negative", r.MaxBytes)
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if err := e.api.SetStreamRetention(ctx, args[0], r); err != nil {
				return err
			}
			if e.json {
				return e.emit(map[string]any{"namespace": args[0], "maxAge": formatDuration(r.MaxAge), "maxBytes": r.MaxBytes,
					"expiry": formatDuration(r.Expiry), "parked": formatDuration(r.Parked)})
			}
			_, err := fmt.Fprintf(e.stdout, "namespace %s: max age %s, max bytes %d, expiry %s, parked %s\n", args[0],
				orNone(r.MaxAge), r.MaxBytes, orNone(r.Expiry), orNone(r.Parked))
			return err
		}}
}

func opStreamConsume() *op {
	var namespace, fail, replay string
	var count, replayMax int
	var forD time.Duration
	return &op{name: "stream consume", args: "CONSUMER", minArgs: 1, maxArgs: 1, streams: true,
		about: "Runs a processor of a consumer and prints each event it delivers, until Ctrl-C, --count events\n" +
			"or --for a while. It joins the consumer's group: while it runs it takes a share of the consumer's\n" +
			"partitions from its other processors, and each event it prints is done (--fail fails it instead).\n" +
			"--replay delivers a subscription's parked events again through it, then stops.",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&namespace, "namespace", "", "subscribe the consumer to every stream of this namespace, from now on")
			fs.IntVar(&count, "count", 0, "stop after this many events (0: no limit)")
			fs.Var((*durationValue)(&forD), "for", "stop after this long (0: no limit)")
			fs.StringVar(&fail, "fail", "", "fail each event with this error: it is retried, then handled by the failure policy (parked)")
			fs.StringVar(&replay, "replay", "", "replay this subscription's parked events, print how many were delivered, and stop")
			fs.IntVar(&replayMax, "replay-max", 100, "replay at most this many parked events")
		},
		check: func([]string) error {
			switch {
			case count < 0 || forD < 0:
				return errors.New("--count and --for must not be negative")
			case replayMax < 1:
				return fmt.Errorf("--replay-max %d: want at least 1", replayMax)
			case replay != "" && fail != "":
				return errors.New("--replay and --fail exclude each other: a replayed event that fails stays parked")
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if forD > 0 {
				ctx, cancel = context.WithTimeout(ctx, forD)
				defer cancel()
			}
			var mu sync.Mutex
			printed := 0
			handler := func(hctx context.Context, ev *sluice.StreamEvent) error {
				mu.Lock()
				defer mu.Unlock()
				if count > 0 && printed >= count {
					return errors.New("sluice stream consume: stopping") // delivered again to the next processor
				}
				if err := e.printEvent(ev); err != nil {
					return err
				}
				if printed++; count > 0 && printed >= count {
					cancel()
				}
				if fail != "" {
					return errors.New(fail)
				}
				return nil
			}
			p := e.api.StreamEventProcessor(nil)
			if err := p.Handle(args[0], handler, &sluice.ConsumerOptions{Namespace: namespace, MaxConcurrency: 1}); err != nil {
				return err
			}
			if err := p.Start(ctx); err != nil {
				return err
			}
			defer p.Stop(context.WithoutCancel(ctx))
			if replay != "" {
				n, err := replayParked(ctx, p, replay, replayMax)
				if e.json {
					if jerr := e.emit(map[string]any{"subscription": replay, "replayed": n}); jerr != nil {
						return jerr
					}
				} else {
					fmt.Fprintf(e.stderr, "sluice stream consume: replayed %d parked events of %s\n", n, replay)
				}
				return err
			}
			fmt.Fprintf(e.stderr, "sluice stream consume: consuming as %s; Ctrl-C stops\n", args[0])
			<-ctx.Done()
			return nil
		}}
}

// replayWait bounds how long a replay waits for the processor to pull
// the partitions of the parked events: it joined the group just now.
const replayWait = 30 * time.Second

// replayParked replays up to max parked events of a subscription through
// p, trying again while p does not pull their partitions yet.
func replayParked(ctx context.Context, p sluice.StreamEventProcessor, subscription string, max int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, replayWait)
	defer cancel()
	total := 0
	for {
		n, err := p.Replay(ctx, subscription, max-total)
		total += n
		if !errors.Is(err, sluice.ErrPartitionNotPulled) || total >= max {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, fmt.Errorf("%w (another processor of the consumer holds them: replay there, or stop it)", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
