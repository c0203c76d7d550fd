package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// statsView is an entity's message counts as --json prints them.
type statsView struct {
	Entity       string `json:"entity,omitempty"`
	Topic        string `json:"topic,omitempty"`
	Active       int64  `json:"active"`
	Expired      int64  `json:"expired"`
	Scheduled    int64  `json:"scheduled"`
	InFlight     int64  `json:"inFlight"`
	Deferred     int64  `json:"deferred"`
	DeadLettered int64  `json:"deadLettered"`
	OldestAge    string `json:"oldestAge"`
	// OldestDeferredAge is the oldest deferred message's age.
	OldestDeferredAge string `json:"oldestDeferredAge"`
}

func statsViewOf(entity, topic string, s sluice.QueueStats) *statsView {
	return &statsView{Entity: entity, Topic: topic, Active: s.Active, Expired: s.Expired, Scheduled: s.Scheduled, InFlight: s.InFlight,
		Deferred: s.Deferred, DeadLettered: s.DeadLettered, OldestAge: formatDuration(s.OldestAge),
		OldestDeferredAge: formatDuration(s.OldestDeferredAge)}
}

// age formats the oldest message's age, to the millisecond.
func age(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

func statsRows(s sluice.QueueStats) [][2]string {
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	return [][2]string{
		{"active", n(s.Active)}, {"expired", n(s.Expired)}, {"scheduled", n(s.Scheduled)}, {"in flight", n(s.InFlight)},
		{"deferred", n(s.Deferred)}, {"dead-lettered", n(s.DeadLettered)}, {"oldest active", age(s.OldestAge)},
		{"oldest deferred", age(s.OldestDeferredAge)},
	}
}

func opStats() *op {
	var throughput, history bool
	return &op{name: "stats", args: "[ENTITY]", maxArgs: 1,
		about: "Prints an entity's message counts, or those of every queue and subscription; --throughput, the\n" +
			"server's rates of messages sent, received and settled over the last minutes; --history, what the\n" +
			"server sampled of ENTITY over the last hour, oldest first: its counts by state and the server's\n" +
			"rates of messages sent to it, received and settled, in messages per second.",
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&throughput, "throughput", false, "print the server's message rates, oldest first (through a server)")
			fs.BoolVar(&history, "history", false, "print ENTITY's counts and rates over the last hour, oldest first (through a server)")
		},
		check: func(args []string) error {
			switch {
			case throughput && history:
				return errors.New("--throughput and --history exclude each other")
			case throughput && len(args) > 0:
				return errors.New("--throughput counts every entity: give no ENTITY")
			case history && len(args) == 0:
				return errors.New("--history samples one entity: give ENTITY")
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if throughput {
				return printThroughput(ctx, e)
			}
			if history {
				return printEntityHistory(ctx, e, args[0])
			}
			var all []client.EntityStats
			if len(args) == 1 {
				st, err := e.api.GetQueueStats(ctx, args[0])
				if err != nil {
					return err
				}
				all = append(all, client.EntityStats{Entity: args[0], QueueStats: st})
			} else {
				var err error
				if all, err = e.api.allStats(ctx); err != nil {
					return err
				}
			}
			if e.json {
				for _, s := range all {
					if err := e.emit(statsViewOf(s.Entity, s.Topic, s.QueueStats)); err != nil {
						return err
					}
				}
				return nil
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "ENTITY\tACTIVE\tEXPIRED\tSCHEDULED\tIN FLIGHT\tDEFERRED\tDEAD-LETTERED\tOLDEST ACTIVE\tOLDEST DEFERRED")
			for _, s := range all {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Entity, s.Active, s.Expired, s.Scheduled, s.InFlight,
					s.Deferred, s.DeadLettered, age(s.OldestAge), age(s.OldestDeferredAge))
			}
			return tw.Flush()
		}}
}

// throughputView is a sample of the server's rates as --json prints it.
// Rates are per second; bucket is the time each sample spans.
type throughputView struct {
	At       time.Time `json:"at"`
	Bucket   string    `json:"bucket"`
	Sent     float64   `json:"sent"`
	Received float64   `json:"received"`
	Settled  float64   `json:"settled"`
}

func printThroughput(ctx context.Context, e *env) error {
	span, samples, err := e.api.throughput(ctx)
	if err != nil {
		return err
	}
	if e.json {
		for _, s := range samples {
			if err := e.emit(throughputView{At: s.At.UTC(), Bucket: formatDuration(span), Sent: s.Sent, Received: s.Received,
				Settled: s.Settled}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := table(e.stdout)
	fmt.Fprintf(tw, "FROM\tSENT/S\tRECEIVED/S\tSETTLED/S\t(each row %s)\n", span)
	for _, s := range samples {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t\n", when(s.At), s.Sent, s.Received, s.Settled)
	}
	return tw.Flush()
}

// entityHistoryView is a sample of an entity's history as --json prints
// it, with the API's field names: its counts by state, and the server's
// rates since the sample before (per second); interval is how often the
// server samples.
type entityHistoryView struct {
	Entity       string    `json:"entity"`
	Interval     string    `json:"interval"`
	At           time.Time `json:"at"`
	Active       int64     `json:"active"`
	InFlight     int64     `json:"inFlight"`
	Scheduled    int64     `json:"scheduled"`
	Deferred     int64     `json:"deferred"`
	DeadLettered int64     `json:"deadLettered"`
	Expired      int64     `json:"expired"`
	Sent         float64   `json:"sent"`
	Received     float64   `json:"received"`
	Settled      float64   `json:"settled"`
}

func printEntityHistory(ctx context.Context, e *env, entity string) error {
	interval, samples, err := e.api.entityHistory(ctx, entity)
	if err != nil {
		return err
	}
	if e.json {
		for _, s := range samples {
			if err := e.emit(entityHistoryView{Entity: entity, Interval: formatDuration(interval), At: s.At.UTC(), Active: s.Active,
				InFlight: s.InFlight, Scheduled: s.Scheduled, Deferred: s.Deferred, DeadLettered: s.DeadLettered, Expired: s.Expired,
				Sent: s.Sent, Received: s.Received, Settled: s.Settled}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := table(e.stdout)
	fmt.Fprintf(tw, "AT\tACTIVE\tIN FLIGHT\tSCHEDULED\tDEFERRED\tDEAD-LETTERED\tEXPIRED\tSENT/S\tRECEIVED/S\tSETTLED/S\t(a sample every %s)\n", interval)
	for _, s := range samples {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t\n", when(s.At), s.Active, s.InFlight, s.Scheduled,
			s.Deferred, s.DeadLettered, s.Expired, s.Sent, s.Received, s.Settled)
	}
	return tw.Flush()
}
