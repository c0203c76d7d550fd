package cli

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
)

// subscriptionView is a subscription as --json prints it.
type subscriptionView struct {
	Topic               string     `json:"topic"`
	Name                string     `json:"name"`
	Path                string     `json:"path"`
	LockDuration        string     `json:"lockDuration"`
	MaxDeliveryCount    int        `json:"maxDeliveryCount"`
	DefaultTTL          string     `json:"defaultTtl"`
	DeadLetterOnExpiry  bool       `json:"deadLetterOnExpiry"`
	DeadLetterRetention string     `json:"deadLetterRetention"`
	RequiresSession     bool       `json:"requiresSession"`
	ForwardTo           string     `json:"forwardTo,omitempty"`
	IgnoreFilterErrors  bool       `json:"ignoreFilterErrors"`
	Rules               []ruleView `json:"rules"`
	Stats               *statsView `json:"stats,omitempty"`
}

// ruleView is a rule as --json prints it: its filter's kind (true,
// false, sql or correlation) and what it tests.
type ruleView struct {
	Name        string            `json:"name"`
	Filter      string            `json:"filter"`
	SQL         string            `json:"sql,omitempty"`
	Correlation map[string]string `json:"correlation,omitempty"`
}

func subscriptionViewOf(s sluice.SubscriptionInfo) subscriptionView {
	p := s.SubscriptionProperties
	v := subscriptionView{Topic: s.Topic, Name: s.Name, Path: sluice.SubscriptionPath(s.Topic, s.Name),
		LockDuration: formatDuration(p.LockDuration), MaxDeliveryCount: p.MaxDeliveryCount, DefaultTTL: formatDuration(p.DefaultTTL),
		DeadLetterOnExpiry: p.DeadLetterOnExpiry, DeadLetterRetention: formatDuration(p.DeadLetterRetention),
		RequiresSession: p.RequiresSession, ForwardTo: p.ForwardTo, IgnoreFilterErrors: p.IgnoreFilterErrors,
		Rules: []ruleView{}}
	for _, r := range s.Rules {
		v.Rules = append(v.Rules, ruleViewOf(r))
	}
	return v
}

// correlationKeys are the --correlation keys of the system properties, as
// a filter's fields.
func correlationKeys(f *sluice.CorrelationFilter) map[string]*string {
	return map[string]*string{
		"correlation-id": &f.CorrelationID, "message-id": &f.MessageID, "subject": &f.Subject, "to": &f.To,
		"reply-to": &f.ReplyTo, "session-id": &f.SessionID, "reply-to-session-id": &f.ReplyToSessionID,
		"content-type": &f.ContentType,
	}
}

func ruleViewOf(r sluice.Rule) ruleView {
	v := ruleView{Name: r.Name}
	switch f := r.Filter.(type) {
	case sluice.TrueFilter:
		v.Filter = "true"
	case sluice.FalseFilter:
		v.Filter = "false"
	case sluice.SQLFilter:
		v.Filter, v.SQL = "sql", f.Expression
	case sluice.CorrelationFilter:
		v.Filter, v.Correlation = "correlation", make(map[string]string)
		for k, p := range correlationKeys(&f) {
			if *p != "" {
				v.Correlation[k] = *p
			}
		}
		for k, val := range f.Properties {
			v.Correlation["prop."+k] = val
		}
	default:
		v.Filter = fmt.Sprintf("%T", f)
	}
	return v
}

// text describes the rule's filter for people.
func (v ruleView) text() string {
	switch v.Filter {
	case "sql":
		return "sql: " + v.SQL
	case "correlation":
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(v.Correlation)) {
			pairs = append(pairs, k+"="+v.Correlation[k])
		}
		return "correlation: " + strings.Join(pairs, " ")
	}
	return v.Filter
}

func (e *env) printSubscription(s sluice.SubscriptionInfo, st *sluice.QueueStats) error {
	v := subscriptionViewOf(s)
	if st != nil {
		v.Stats = statsViewOf("", "", *st)
	}
	if e.json {
		return e.emit(v)
	}
	p := s.SubscriptionProperties
	rows := [][2]string{
		{"subscription", v.Path},
		{"lock duration", p.LockDuration.String()},
		{"max delivery count", strconv.Itoa(p.MaxDeliveryCount)},
		{"default ttl", orNone(p.DefaultTTL)},
		{"dead-letter on expiry", yesNo(p.DeadLetterOnExpiry)},
		{"dead-letter retention", orNone(p.DeadLetterRetention)},
		{"requires session", yesNo(p.RequiresSession)},
		{"forward to", orDash(p.ForwardTo)},
		{"ignore filter errors", yesNo(p.IgnoreFilterErrors)},
	}
	for _, r := range v.Rules {
		rows = append(rows, [2]string{"rule " + r.Name, r.text()})
	}
	if st != nil {
		rows = append(rows, statsRows(*st)...)
	}
	return e.printRows(rows)
}

// ruleFlags are the flags that give a new subscription its rules.
type ruleFlags struct {
	sql, correlation repeated
}

func (f *ruleFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.sql, "sql-filter", "a rule with this SQL-like filter, e.g. \"color = 'red' AND sys.subject LIKE 'order%'\" (repeatable: rules sql-1, sql-2, ...)")
	fs.Var(&f.correlation, "correlation", "key=value that a message must have, for the rule named correlation (repeatable: all must match); "+
		"key is correlation-id, message-id, subject, to, reply-to, session-id, reply-to-session-id, content-type or prop.NAME")
}

// rules returns the rules the flags give: none takes the default rule,
// which matches every message.
func (f *ruleFlags) rules() ([]sluice.Rule, error) {
	var rules []sluice.Rule
	for i, expr := range f.sql {
		rules = append(rules, sluice.Rule{Name: "sql-" + strconv.Itoa(i+1), Filter: sluice.SQLFilter{Expression: expr}})
	}
	if len(f.correlation) == 0 {
		return rules, nil
	}
	var cf sluice.CorrelationFilter
	fields := correlationKeys(&cf)
	for _, pair := range f.correlation {
		k, v, ok := strings.Cut(pair, "=")
		name, isProp := strings.CutPrefix(k, "prop.")
		switch {
		case !ok:
			return nil, fmt.Errorf("--correlation %q: want key=value", pair)
		case isProp && name != "":
			if cf.Properties == nil {
				cf.Properties = make(map[string]string)
			}
			cf.Properties[name] = v
		case fields[k] != nil:
			*fields[k] = v
		default:
			return nil, fmt.Errorf("--correlation %q: the key is one of correlation-id, message-id, subject, to, reply-to, "+
				"session-id, reply-to-session-id, content-type, or prop.NAME for an application property", pair)
		}
	}
	return append(rules, sluice.Rule{Name: "correlation", Filter: cf}), nil
}

func opSubscriptionCreate() *op {
	var f propFlags
	var rf ruleFlags
	var rules []sluice.Rule
	var ifNotExists bool
	return &op{name: "subscription create", args: "TOPIC NAME", minArgs: 2, maxArgs: 2,
		about: "Creates a subscription of a topic. Its rules come from --sql-filter and --correlation;\n" +
			"without them it gets every message (the rule $Default).",
		flags: func(fs *flag.FlagSet) {
			f.register(fs, "lock-duration", "max-delivery-count", "default-ttl", "dead-letter-on-expiry", "dead-letter-retention",
				"requires-session", "forward-to", "ignore-filter-errors")
			rf.register(fs)
			fs.BoolVar(&ifNotExists, "if-not-exists", false,
				"succeed, changing nothing (rules neither), when the subscription exists (it is printed as it is)")
		},
		check: func([]string) error {
			var err error
			rules, err = rf.rules()
			return err
		},
		run: func(ctx context.Context, e *env, args []string) error {
			props := f.subscription()
			s, err := e.api.CreateSubscription(ctx, args[0], args[1], &props, rules...)
			if ifNotExists && existing(e, err, "subscription", sluice.SubscriptionPath(args[0], args[1])) {
				s, err = e.api.GetSubscription(ctx, args[0], args[1])
			}
			if err != nil {
				return err
			}
			return e.printSubscription(s, nil)
		}}
}

func opSubscriptionList() *op {
	return &op{name: "subscription list", args: "TOPIC", about: "Lists a topic's subscriptions with their rules.",
		minArgs: 1, maxArgs: 1,
		run: func(ctx context.Context, e *env, args []string) error {
			subs, err := e.api.ListSubscriptions(ctx, args[0])
			if err != nil {
				return err
			}
			if e.json {
				for _, s := range subs {
					if err := e.emit(subscriptionViewOf(s)); err != nil {
						return err
					}
				}
				return nil
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "NAME\tLOCK\tMAX DELIVERY\tSESSIONS\tFORWARD TO\tRULES")
			for _, s := range subs {
				v := subscriptionViewOf(s)
				var rules []string
				for _, r := range v.Rules {
					rules = append(rules, r.Name+" ("+r.text()+")")
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", s.Name, s.LockDuration, s.MaxDeliveryCount, yesNo(s.RequiresSession),
					orDash(s.ForwardTo), strings.Join(rules, "; "))
			}
			return tw.Flush()
		}}
}

func opSubscriptionShow() *op {
	return &op{name: "subscription show", args: "TOPIC NAME", about: "Prints a subscription's settings, rules and message counts.",
		minArgs: 2, maxArgs: 2,
		run: func(ctx context.Context, e *env, args []string) error {
			s, err := e.api.GetSubscription(ctx, args[0], args[1])
			if err != nil {
				return err
			}
			st, err := e.api.GetQueueStats(ctx, sluice.SubscriptionPath(args[0], args[1]))
			if err != nil {
				return err
			}
			return e.printSubscription(s, &st)
		}}
}

func opSubscriptionDelete() *op {
	return &op{name: "subscription delete", args: "TOPIC NAME", about: "Deletes a subscription with its messages.",
		minArgs: 2, maxArgs: 2,
		confirm: func(args []string) string {
			return fmt.Sprintf("Delete subscription %s with its messages and dead letters", sluice.SubscriptionPath(args[0], args[1]))
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if err := e.api.DeleteSubscription(ctx, args[0], args[1]); err != nil {
				return err
			}
			return e.printDeleted("subscription", sluice.SubscriptionPath(args[0], args[1]))
		}}
}
