package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice"
)

// queueView is a queue as --json prints it.
type queueView struct {
	Name                       string     `json:"name"`
	LockDuration               string     `json:"lockDuration"`
	MaxDeliveryCount           int        `json:"maxDeliveryCount"`
	DefaultTTL                 string     `json:"defaultTtl"`
	DeadLetterOnExpiry         bool       `json:"deadLetterOnExpiry"`
	DeadLetterRetention        string     `json:"deadLetterRetention"`
	MaxMessageSize             int        `json:"maxMessageSize"`
	RequiresDuplicateDetection bool       `json:"requiresDuplicateDetection"`
	DuplicateDetectionWindow   string     `json:"duplicateDetectionWindow"`
	RequiresSession            bool       `json:"requiresSession"`
	PartitionCount             int        `json:"partitionCount"`
	ForwardTo                  string     `json:"forwardTo,omitempty"`
	Stats                      *statsView `json:"stats,omitempty"`
}

func queueViewOf(q sluice.QueueInfo) queueView {
	p := q.QueueProperties
	return queueView{Name: q.Name, LockDuration: formatDuration(p.LockDuration), MaxDeliveryCount: p.MaxDeliveryCount,
		DefaultTTL: formatDuration(p.DefaultTTL), DeadLetterOnExpiry: p.DeadLetterOnExpiry,
		DeadLetterRetention: formatDuration(p.DeadLetterRetention), MaxMessageSize: p.MaxMessageSize,
		RequiresDuplicateDetection: p.RequiresDuplicateDetection, DuplicateDetectionWindow: formatDuration(p.DuplicateDetectionWindow),
		RequiresSession: p.RequiresSession, PartitionCount: p.PartitionCount, ForwardTo: q.ForwardTo}
}

// printQueue prints a queue's settings, and its counts when it has them.
func (e *env) printQueue(q sluice.QueueInfo, st *sluice.QueueStats) error {
	v := queueViewOf(q)
	if st != nil {
		v.Stats = statsViewOf("", "", *st)
	}
	if e.json {
		return e.emit(v)
	}
	p := q.QueueProperties
	rows := [][2]string{
		{"queue", q.Name},
		{"lock duration", p.LockDuration.String()},
		{"max delivery count", strconv.Itoa(p.MaxDeliveryCount)},
		{"default ttl", orNone(p.DefaultTTL)},
		{"dead-letter on expiry", yesNo(p.DeadLetterOnExpiry)},
		{"dead-letter retention", orNone(p.DeadLetterRetention)},
		{"max message size", strconv.Itoa(p.MaxMessageSize)},
		{"duplicate detection", duplicateText(p.RequiresDuplicateDetection, p.DuplicateDetectionWindow)},
		{"requires session", yesNo(p.RequiresSession)},
		{"partitions", strconv.Itoa(p.PartitionCount)},
		{"forward to", orDash(q.ForwardTo)},
	}
	if st != nil {
		rows = append(rows, statsRows(*st)...)
	}
	return e.printRows(rows)
}

// printRows prints labelled values, aligned.
func (e *env) printRows(rows [][2]string) error {
	tw := table(e.stdout)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// printDeleted says what was deleted.
func (e *env) printDeleted(kind, name string) error {
	if e.json {
		return e.emit(map[string]string{"deleted": kind, "name": name})
	}
	_, err := fmt.Fprintf(e.stdout, "deleted %s %s\n", kind, name)
	return err
}

var queueSettings = []string{"lock-duration", "max-delivery-count", "default-ttl", "dead-letter-on-expiry", "dead-letter-retention",
	"max-message-size", "duplicate-detection", "duplicate-window", "requires-session", "partitions", "forward-to"}

func opQueueCreate() *op {
	var f propFlags
	var props sluice.QueueProperties
	var ifNotExists bool
	return &op{name: "queue create", args: "NAME", about: "Creates a queue; settings not given take their defaults.",
		minArgs: 1, maxArgs: 1,
		flags: func(fs *flag.FlagSet) {
			f.register(fs, queueSettings...)
			fs.BoolVar(&ifNotExists, "if-not-exists", false, "succeed, changing nothing, when the queue exists (it is printed as it is)")
		},
		check: func([]string) error {
			var err error
			props, err = f.queue()
			return err
		},
		run: func(ctx context.Context, e *env, args []string) error {
			q, err := e.api.CreateQueueForwarding(ctx, args[0], &props, f.forwardTo)
			if ifNotExists && existing(e, err, "queue", args[0]) {
				q, err = e.api.GetQueue(ctx, args[0])
			}
			if err != nil {
				return err
			}
			return e.printQueue(q, nil)
		}}
}

func opQueueList() *op {
	return &op{name: "queue list", about: "Lists the queues with their main settings.",
		run: func(ctx context.Context, e *env, _ []string) error {
			queues, err := allQueues(ctx, e.api)
			if err != nil {
				return err
			}
			if e.json {
				for _, q := range queues {
					if err := e.emit(queueViewOf(q)); err != nil {
						return err
					}
				}
				return nil
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "NAME\tLOCK\tMAX DELIVERY\tTTL\tSESSIONS\tDUPLICATES\tPARTITIONS\tFORWARD TO")
			for _, q := range queues {
				p := q.QueueProperties
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\n", q.Name, p.LockDuration, p.MaxDeliveryCount, orNone(p.DefaultTTL),
					yesNo(p.RequiresSession), duplicateText(p.RequiresDuplicateDetection, p.DuplicateDetectionWindow), p.PartitionCount, orDash(q.ForwardTo))
			}
			return tw.Flush()
		}}
}

func opQueueShow() *op {
	return &op{name: "queue show", args: "NAME", about: "Prints a queue's settings and its message counts.", minArgs: 1, maxArgs: 1,
		run: func(ctx context.Context, e *env, args []string) error {
			q, err := e.api.GetQueue(ctx, args[0])
			if err != nil {
				return err
			}
			st, err := e.api.GetQueueStats(ctx, args[0])
			if err != nil {
				return err
			}
			return e.printQueue(q, &st)
		}}
}

func opQueueDelete() *op {
	return &op{name: "queue delete", args: "NAME", about: "Deletes a queue with its messages and dead letters.", minArgs: 1, maxArgs: 1,
		confirm: func(args []string) string {
			return fmt.Sprintf("Delete queue %q with its messages and dead letters", args[0])
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if err := e.api.DeleteQueue(ctx, args[0]); err != nil {
				return err
			}
			return e.printDeleted("queue", args[0])
		}}
}
