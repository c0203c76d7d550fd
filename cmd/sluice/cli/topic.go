package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice"
)

// topicView is a topic as --json prints it.
type topicView struct {
	Name                       string   `json:"name"`
	DefaultTTL                 string   `json:"defaultTtl"`
	MaxMessageSize             int      `json:"maxMessageSize"`
	RequiresDuplicateDetection bool     `json:"requiresDuplicateDetection"`
	DuplicateDetectionWindow   string   `json:"duplicateDetectionWindow"`
	PartitionCount             int      `json:"partitionCount"`
	Subscriptions              []string `json:"subscriptions,omitempty"`
}

func topicViewOf(t sluice.TopicInfo) topicView {
	p := t.TopicProperties
	return topicView{Name: t.Name, DefaultTTL: formatDuration(p.DefaultTTL), MaxMessageSize: p.MaxMessageSize,
		RequiresDuplicateDetection: p.RequiresDuplicateDetection, DuplicateDetectionWindow: formatDuration(p.DuplicateDetectionWindow),
		PartitionCount: p.PartitionCount}
}

// printTopic prints a topic's settings, and its subscriptions' names when
// given them.
func (e *env) printTopic(t sluice.TopicInfo, subs []sluice.SubscriptionInfo) error {
	v := topicViewOf(t)
	for _, s := range subs {
		v.Subscriptions = append(v.Subscriptions, s.Name)
	}
	if e.json {
		return e.emit(v)
	}
	p := t.TopicProperties
	rows := [][2]string{
		{"topic", t.Name},
		{"default ttl", orNone(p.DefaultTTL)},
		{"max message size", strconv.Itoa(p.MaxMessageSize)},
		{"duplicate detection", duplicateText(p.RequiresDuplicateDetection, p.DuplicateDetectionWindow)},
		{"partitions", strconv.Itoa(p.PartitionCount)},
	}
	for _, s := range subs {
		rows = append(rows, [2]string{"subscription", s.Name})
	}
	return e.printRows(rows)
}

func opTopicCreate() *op {
	var f propFlags
	var props sluice.TopicProperties
	var ifNotExists bool
	return &op{name: "topic create", args: "NAME", about: "Creates a topic; settings not given take their defaults.",
		minArgs: 1, maxArgs: 1,
		flags: func(fs *flag.FlagSet) {
			f.register(fs, "default-ttl", "max-message-size", "duplicate-detection", "duplicate-window", "partitions")
			fs.BoolVar(&ifNotExists, "if-not-exists", false, "succeed, changing nothing, when the topic exists (it is printed as it is)")
		},
		check: func([]string) error {
			var err error
			props, err = f.topic()
			return err
		},
		run: func(ctx context.Context, e *env, args []string) error {
			t, err := e.api.CreateTopic(ctx, args[0], &props)
			if ifNotExists && existing(e, err, "topic", args[0]) {
				t, err = e.api.GetTopic(ctx, args[0])
			}
			if err != nil {
				return err
			}
			return e.printTopic(t, nil)
		}}
}

func opTopicList() *op {
	return &op{name: "topic list", about: "Lists the topics with their settings.",
		run: func(ctx context.Context, e *env, _ []string) error {
			topics, err := allTopics(ctx, e.api)
			if err != nil {
				return err
			}
			if e.json {
				for _, t := range topics {
					if err := e.emit(topicViewOf(t)); err != nil {
						return err
					}
				}
				return nil
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "NAME\tTTL\tMAX MESSAGE SIZE\tDUPLICATES")
			for _, t := range topics {
				p := t.TopicProperties
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.Name, orNone(p.DefaultTTL), p.MaxMessageSize,
					duplicateText(p.RequiresDuplicateDetection, p.DuplicateDetectionWindow))
			}
			return tw.Flush()
		}}
}

func opTopicShow() *op {
	return &op{name: "topic show", args: "NAME", about: "Prints a topic's settings and its subscriptions.", minArgs: 1, maxArgs: 1,
		run: func(ctx context.Context, e *env, args []string) error {
			t, err := e.api.GetTopic(ctx, args[0])
			if err != nil {
				return err
			}
			subs, err := e.api.ListSubscriptions(ctx, args[0])
			if err != nil {
				return err
			}
			return e.printTopic(t, subs)
		}}
}

func opTopicDelete() *op {
	return &op{name: "topic delete", args: "NAME", about: "Deletes a topic with its subscriptions and their messages.",
		minArgs: 1, maxArgs: 1,
		confirm: func(args []string) string {
			return fmt.Sprintf("Delete topic %q with its subscriptions and their messages", args[0])
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if err := e.api.DeleteTopic(ctx, args[0]); err != nil {
				return err
			}
			return e.printDeleted("topic", args[0])
		}}
}
