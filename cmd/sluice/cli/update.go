package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// given lists the flags set on the command line, by name.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// existing says on stderr that a create with --if-not-exists found the
// entity there, and returns whether err is that case.
func existing(e *env, err error, kind, name string) bool {
	if !errors.Is(err, sluice.ErrEntityExists) {
		return false
	}
	fmt.Fprintf(e.stderr, "sluice: %s %s exists: left as it is (--if-not-exists)\n", kind, name)
	return true
}

// The settings an update may change: those fixed at creation
// (requires-session, duplicate-detection, partitions) are not among them.
var (
	queueUpdates = []string{"lock-duration", "max-delivery-count", "default-ttl", "dead-letter-on-expiry", "dead-letter-retention",
		"max-message-size", "duplicate-window", "forward-to"}
	topicUpdates        = []string{"default-ttl", "max-message-size", "duplicate-window"}
	subscriptionUpdates = []string{"lock-duration", "max-delivery-count", "default-ttl", "dead-letter-on-expiry",
		"dead-letter-retention", "forward-to", "ignore-filter-errors"}
)

const updateAbout = "Changes the settings given; the others keep their values (requires-session, duplicate\n" +
	"detection and partitions are fixed at creation)."

func opQueueUpdate() *op {
	var f propFlags
	var fs *flag.FlagSet
	return &op{name: "queue update", args: "NAME", minArgs: 1, maxArgs: 1,
		about: "Changes a queue's settings. " + updateAbout + " --forward-to \"\" stops forwarding.",
		flags: func(s *flag.FlagSet) { fs = s; f.register(s, queueUpdates...) },
		check: func([]string) error { return noneGiven(fs, queueUpdates) },
		run: func(ctx context.Context, e *env, args []string) error {
			q, err := e.api.GetQueue(ctx, args[0])
			if err != nil {
				return err
			}
			set, p := given(fs), q.QueueProperties
			overlay(set, &f, &p.LockDuration, &p.MaxDeliveryCount, &p.DefaultTTL, &p.DeadLetterOnExpiry, &p.DeadLetterRetention)
			if set["max-message-size"] {
				p.MaxMessageSize = f.maxSize
			}
			if set["duplicate-window"] {
				p.DuplicateDetectionWindow = f.duplicateWindow
			}
			forward := q.ForwardTo
			if set["forward-to"] {
				forward = f.forwardTo
			}
			q, err = e.api.UpdateQueueForwarding(ctx, args[0], p, forward)
			if err != nil {
				return err
			}
			return e.printQueue(q, nil)
		}}
}

func opTopicUpdate() *op {
	var f propFlags
	var fs *flag.FlagSet
	return &op{name: "topic update", args: "NAME", minArgs: 1, maxArgs: 1,
		about: "Changes a topic's settings. " + updateAbout,
		flags: func(s *flag.FlagSet) { fs = s; f.register(s, topicUpdates...) },
		check: func([]string) error { return noneGiven(fs, topicUpdates) },
		run: func(ctx context.Context, e *env, args []string) error {
			t, err := e.api.GetTopic(ctx, args[0])
			if err != nil {
				return err
			}
			set, p := given(fs), t.TopicProperties
			if set["default-ttl"] {
				p.DefaultTTL = f.ttl
			}
			if set["max-message-size"] {
				p.MaxMessageSize = f.maxSize
			}
			if set["duplicate-window"] {
				p.DuplicateDetectionWindow = f.duplicateWindow
			}
			if t, err = e.api.UpdateTopic(ctx, args[0], p); err != nil {
				return err
			}
			return e.printTopic(t, nil)
		}}
}

func opSubscriptionUpdate() *op {
	var f propFlags
	var fs *flag.FlagSet
	return &op{name: "subscription update", args: "TOPIC NAME", minArgs: 2, maxArgs: 2,
		about: "Changes a subscription's settings; its rules stay (rule add, rule delete). " + updateAbout +
			"\n--forward-to \"\" stops forwarding.",
		flags: func(s *flag.FlagSet) { fs = s; f.register(s, subscriptionUpdates...) },
		check: func([]string) error { return noneGiven(fs, subscriptionUpdates) },
		run: func(ctx context.Context, e *env, args []string) error {
			s, err := e.api.GetSubscription(ctx, args[0], args[1])
			if err != nil {
				return err
			}
			set, p := given(fs), s.SubscriptionProperties
			overlay(set, &f, &p.LockDuration, &p.MaxDeliveryCount, &p.DefaultTTL, &p.DeadLetterOnExpiry, &p.DeadLetterRetention)
			if set["forward-to"] {
				p.ForwardTo = f.forwardTo
			}
			if set["ignore-filter-errors"] {
				p.IgnoreFilterErrors = f.ignoreFilterErrors
			}
			if s, err = e.api.UpdateSubscriptionForwarding(ctx, args[0], args[1], p); err != nil {
				return err
			}
			return e.printSubscription(s, nil)
		}}
}

// overlay sets the settings queues and subscriptions share to the flags
// given.
func overlay(set map[string]bool, f *propFlags, lock *time.Duration, maxDelivery *int, ttl *time.Duration,
	onExpiry *bool, retention *time.Duration) {
	if set["lock-duration"] {
		*lock = f.lock
	}
	if set["max-delivery-count"] {
		*maxDelivery = f.maxDelivery
	}
	if set["default-ttl"] {
		*ttl = f.ttl
	}
	if set["dead-letter-on-expiry"] {
		*onExpiry = f.deadLetterOnExpiry
	}
	if set["dead-letter-retention"] {
		*retention = f.deadLetterRetention
	}
}

// noneGiven refuses an update that changes nothing.
func noneGiven(fs *flag.FlagSet, settings []string) error {
	set := given(fs)
	for _, s := range settings {
		if set[s] {
			return nil
		}
	}
	return errors.New("nothing to change: give the settings to change as flags (-h lists them)")
}

func opRuleAdd() *op {
	var rf ruleFlags
	var rule sluice.Rule
	return &op{name: "rule add", args: "TOPIC SUBSCRIPTION RULE", minArgs: 3, maxArgs: 3,
		about: "Adds a rule to a subscription: a message is copied to it when any of its rules matches.\n" +
			"The filter is one --sql-filter, or --correlation pairs that must all match.",
		flags: rf.register,
		check: func(args []string) error {
			rules, err := rf.rules()
			switch {
			case err != nil:
				return err
			case len(rules) != 1:
				return errors.New("want one filter: one --sql-filter, or --correlation pairs")
			}
			rule = sluice.Rule{Name: args[2], Filter: rules[0].Filter}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if err := e.api.CreateRule(ctx, args[0], args[1], rule); err != nil {
				return err
			}
			return e.printRule("added", args[0], args[1], rule)
		}}
}

func opRuleDelete() *op {
	return &op{name: "rule delete", args: "TOPIC SUBSCRIPTION RULE", minArgs: 3, maxArgs: 3,
		about: "Deletes a rule of a subscription (one without rules receives nothing).",
		run: func(ctx context.Context, e *env, args []string) error {
			if err := e.api.DeleteRule(ctx, args[0], args[1], args[2]); err != nil {
				return err
			}
			return e.printRule("deleted", args[0], args[1], sluice.Rule{Name: args[2]})
		}}
}

// printRule says what became of a rule.
func (e *env) printRule(did, topic, sub string, r sluice.Rule) error {
	path := sluice.SubscriptionPath(topic, sub)
	if e.json {
		v := map[string]any{"outcome": did, "subscription": path, "rule": r.Name}
		if r.Filter != nil {
			v["filter"] = ruleViewOf(r).text()
		}
		return e.emit(v)
	}
	if r.Filter == nil {
		_, err := fmt.Fprintf(e.stdout, "%s rule %s of %s\n", did, r.Name, path)
		return err
	}
	_, err := fmt.Fprintf(e.stdout, "%s rule %s of %s: %s\n", did, r.Name, path, ruleViewOf(r).text())
	return err
}
