package cli

import (
	"errors"
	"flag"
	"time"

	"github.com/sluicehq/sluice"
)

// propFlags are the flags of entity settings; each create command
// registers those of its kind.
type propFlags struct {
	lock, ttl, deadLetterRetention, duplicateWindow time.Duration
	maxDelivery, maxSize, partitions                int
	deadLetterOnExpiry, duplicates, sessions        bool
	ignoreFilterErrors                              bool
	forwardTo                                       string
}

// register registers the named setting flags.
func (f *propFlags) register(fs *flag.FlagSet, names ...string) {
	defs := map[string]func(){
		"lock-duration": func() {
			fs.Var((*durationValue)(&f.lock), "lock-duration", "how long a peek-lock receive holds a message (default 1m, at most 5m)")
		},
		"max-delivery-count": func() {
			fs.IntVar(&f.maxDelivery, "max-delivery-count", 0, "deliveries before a message is dead-lettered (default 10)")
		},
		"default-ttl": func() {
			fs.Var((*durationValue)(&f.ttl), "default-ttl", "time-to-live of messages that set none, and the cap of those that do (default unlimited)")
		},
		"dead-letter-on-expiry": func() {
			fs.BoolVar(&f.deadLetterOnExpiry, "dead-letter-on-expiry", false, "dead-letter expired messages instead of dropping them")
		},
		"dead-letter-retention": func() {
			fs.Var((*durationValue)(&f.deadLetterRetention), "dead-letter-retention", "how long dead letters are kept (default until purged)")
		},
		"max-message-size": func() {
			fs.IntVar(&f.maxSize, "max-message-size", 0, "largest message, in bytes (default 1 MiB, at least 1 KiB)")
		},
		"duplicate-detection": func() {
			fs.BoolVar(&f.duplicates, "duplicate-detection", false, "drop a message whose message id was sent within the --duplicate-window")
		},
		"duplicate-window": func() {
			fs.Var((*durationValue)(&f.duplicateWindow), "duplicate-window", "how long message ids are remembered, with --duplicate-detection (default 10m, 20s to 168h)")
		},
		"requires-session": func() {
			fs.BoolVar(&f.sessions, "requires-session", false, "messages need a session id and are received by session, in order")
		},
		"partitions": func() {
			fs.IntVar(&f.partitions, "partitions", 0, "split the queue (a topic: each of its subscriptions) into this many partitions, each numbered and committed on its own (default 1, at most 16; fixed at creation)")
		},
		"forward-to": func() {
			fs.StringVar(&f.forwardTo, "forward-to", "", "forward every message to this queue or topic")
		},
		"ignore-filter-errors": func() {
			fs.BoolVar(&f.ignoreFilterErrors, "ignore-filter-errors", false, "a filter that fails on a message counts as not matching, instead of dead-lettering the copy")
		},
	}
	for _, name := range names {
		defs[name]()
	}
}

func (f *propFlags) checkDuplicates() error {
	if f.duplicateWindow != 0 && !f.duplicates {
		return errors.New("--duplicate-window needs --duplicate-detection")
	}
	return nil
}

func (f *propFlags) queue() (sluice.QueueProperties, error) {
	return sluice.QueueProperties{
		LockDuration: f.lock, MaxDeliveryCount: f.maxDelivery, DefaultTTL: f.ttl, DeadLetterOnExpiry: f.deadLetterOnExpiry,
		DeadLetterRetention: f.deadLetterRetention, MaxMessageSize: f.maxSize, RequiresDuplicateDetection: f.duplicates,
		DuplicateDetectionWindow: f.duplicateWindow, RequiresSession: f.sessions, PartitionCount: f.partitions,
	}, f.checkDuplicates()
}

func (f *propFlags) topic() (sluice.TopicProperties, error) {
	return sluice.TopicProperties{DefaultTTL: f.ttl, MaxMessageSize: f.maxSize, RequiresDuplicateDetection: f.duplicates,
		DuplicateDetectionWindow: f.duplicateWindow, PartitionCount: f.partitions}, f.checkDuplicates()
}

func (f *propFlags) subscription() sluice.SubscriptionProperties {
	return sluice.SubscriptionProperties{
		LockDuration: f.lock, MaxDeliveryCount: f.maxDelivery, DefaultTTL: f.ttl, DeadLetterOnExpiry: f.deadLetterOnExpiry,
		DeadLetterRetention: f.deadLetterRetention, RequiresSession: f.sessions, ForwardTo: f.forwardTo,
		IgnoreFilterErrors: f.ignoreFilterErrors,
	}
}

// yesNo formats a setting that is on or off.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// duplicateText formats duplicate detection's setting.
func duplicateText(on bool, window time.Duration) string {
	if !on {
		return "off"
	}
	return "on, window " + window.String()
}
