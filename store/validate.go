package store

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/sluicetype"
)

// Limits bound what one call may write or read. Zero fields take defaults.
type Limits struct {
	// MaxMessageBytes bounds one message's payload plus properties
	// (default 1 MiB).
	MaxMessageBytes int
	// MaxBatch bounds the messages or records of one enqueue, append,
	// lease, peek, read or resubmit (default 1000).
	MaxBatch int
	// MaxBatchBytes bounds the bytes of one enqueue or append
	// (default 16 MiB).
	MaxBatchBytes int
}

// Defaults for Limits and QueueSettings.
const (
	DefaultMaxMessageBytes  = 1 << 20
	DefaultMaxBatch         = 1000
	DefaultMaxBatchBytes    = 16 << 20
	DefaultMaxDeliveryCount = 10
	DefaultEvictionInterval = 5 * time.Second
	DefaultEvictionBatch    = 256
)

// Name lengths.
const (
	MaxTenantNameLen = 100
	MaxNameLen       = 260
	MaxKeyLen        = 1024
	MaxReasonLen     = 4096
	// MaxAttributesLen bounds QueueSettings.Attributes.
	MaxAttributesLen = 1 << 20
)

// Bounds of QueueSettings.DuplicateDetectionWindow, as Service Bus has
// them.
const (
	MinDuplicateDetectionWindow = 20 * time.Second
	MaxDuplicateDetectionWindow = 7 * 24 * time.Hour
)

// WithDefaults returns l with zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if l.MaxBatch <= 0 {
		l.MaxBatch = DefaultMaxBatch
	}
	if l.MaxBatchBytes <= 0 {
		l.MaxBatchBytes = DefaultMaxBatchBytes
	}
	return l
}

// ValidateName checks a queue, consumer or namespace name: 1 to 260
// characters of ASCII letters, digits, '.', '-', '_' and '/', starting and
// ending with a letter or digit (the rules of Service Bus entity names).
func ValidateName(kind, name string) error {
	return validateName(kind, name, MaxNameLen, true)
}

// ValidateTenant checks a tenant's service and provider names: 1 to 100
// characters, the same character set as ValidateName without '/'.
func ValidateTenant(t Tenant) error {
	if err := validateName("service", t.Service, MaxTenantNameLen, false); err != nil {
		return err
	}
	return validateName("provider", t.Provider, MaxTenantNameLen, false)
}

func validateName(kind, name string, max int, slash bool) error {
	if name == "" {
		return fmt.Errorf("%s name is empty: %w", kind, sluicetype.ErrInvalidName)
	}
	if len(name) > max {
		return fmt.Errorf("%s name is %d characters long, at most %d allowed: %w", kind, len(name), max, sluicetype.ErrInvalidName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum {
			continue
		}
		if i == 0 || i == len(name)-1 {
			return fmt.Errorf("%s name %q must start and end with a letter or digit: %w", kind, name, sluicetype.ErrInvalidName)
		}
		if c == '.' || c == '-' || c == '_' || c == '/' && slash {
			continue
		}
		return fmt.Errorf("%s name %q holds %q; allowed are letters, digits, '.', '-', '_'%s: %w",
			kind, name, c, map[bool]string{true: " and '/'", false: ""}[slash], sluicetype.ErrInvalidName)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, sluicetype.ErrInvalidArgument)...)
}

// Forever is the longest duration, time.Duration's maximum: what a Go
// caller passes for "forever", and what a longer duration from the network
// API (a protobuf Duration beyond time.Duration's range) saturates to.
//
// One rule holds for every duration sluice takes, at every edge (library,
// network API, configuration, storage): a negative duration is refused
// with ErrInvalidArgument and changes nothing; one that reaches Forever
// saturates, and where "never" has a meaning (a message's time-to-live, a
// queue's DefaultTTL and DeadLetterRetention, a stream retention's
// MaxAge) it means never; a setting with a Service Bus maximum (lock
// duration 5 min, duplicate detection window 7 days) refuses a value past
// it. Storage converts durations to milliseconds saturating at Forever,
// so no stored time is ever negative or wrapped.
const Forever = time.Duration(math.MaxInt64)

// WithDefaults returns s with zero fields set to their defaults, and
// DefaultTTL and DeadLetterRetention of Forever to 0, which means never.
func (s QueueSettings) WithDefaults() QueueSettings {
	if s.DefaultTTL == Forever {
		s.DefaultTTL = 0
	}
	if s.DeadLetterRetention == Forever {
		s.DeadLetterRetention = 0
	}
	if s.MaxDeliveryCount == 0 {
		s.MaxDeliveryCount = DefaultMaxDeliveryCount
	}
	if s.EvictionInterval == 0 {
		s.EvictionInterval = DefaultEvictionInterval
	}
	if s.EvictionBatch == 0 {
		s.EvictionBatch = DefaultEvictionBatch
	}
	return s
}

// Validate checks settings that WithDefaults has completed.
func (s *QueueSettings) Validate() error {
	if err := ValidateName("queue", s.Name); err != nil {
		return err
	}
	switch {
	case s.MaxDeliveryCount < 1:
		return invalid("max delivery count %d: must be at least 1", s.MaxDeliveryCount)
	case s.DefaultTTL < 0:
		return invalid("default TTL %v: must not be negative (0 means unlimited)", s.DefaultTTL)
	case s.DeadLetterRetention < 0:
		return invalid("dead-letter retention %v: must not be negative (0 keeps them until purged)", s.DeadLetterRetention)
	case s.EvictionInterval < time.Millisecond:
		return invalid("eviction interval %v: must be at least 1ms", s.EvictionInterval)
	case s.EvictionBatch < 1 || s.EvictionBatch > 10000:
		return invalid("eviction batch %d: must be between 1 and 10000", s.EvictionBatch)
	case s.DuplicateDetectionWindow != 0 &&
		(s.DuplicateDetectionWindow < MinDuplicateDetectionWindow || s.DuplicateDetectionWindow > MaxDuplicateDetectionWindow):
		return invalid("duplicate detection window %v: must be 0 (off) or between %v and %v",
			s.DuplicateDetectionWindow, MinDuplicateDetectionWindow, MaxDuplicateDetectionWindow)
	case len(s.Attributes) > MaxAttributesLen:
		return invalid("attributes of %d bytes: at most %d allowed", len(s.Attributes), MaxAttributesLen)
	case !utf8.Valid(s.Attributes):
		return invalid("attributes must be valid UTF-8")
	}
	return nil
}

// MessageSize is what counts against Limits.MaxMessageBytes: the payload,
// the properties' keys and values, and the identifying strings.
func (m *NewMessage) MessageSize() int {
	n := len(m.Payload) + len(m.MessageID) + len(m.SessionID) + len(m.PartitionKey) + len(m.ContentType)
	for k, v := range m.Properties {
		n += len(k) + len(v)
	}
	for k, v := range m.Headers {
		n += len(k) + len(v)
	}
	return n
}

// Validate checks a message's fields, whatever the limits: identifiers
// of at most MaxNameLen bytes of UTF-8, its TTL, properties and
// dead-letter reason.
func (m *NewMessage) Validate() error {
	if m.TTL < 0 {
		return invalid("negative TTL %v", m.TTL)
	}
	for _, s := range []struct{ what, v string }{
		{"message id", m.MessageID}, {"session id", m.SessionID},
		{"partition key", m.PartitionKey}, {"content type", m.ContentType},
	} {
		if len(s.v) > MaxNameLen || !utf8.ValidString(s.v) {
			return invalid("%s must be valid UTF-8 of at most %d bytes", s.what, MaxNameLen)
		}
	}
	if err := validateProperties(m.Properties); err != nil {
		return err
	}
	if err := validateProperties(m.Headers); err != nil {
		return fmt.Errorf("headers: %w", err)
	}
	if len(m.DeadLetterReason) > MaxReasonLen || len(m.DeadLetterDescription) > MaxReasonLen ||
		!utf8.ValidString(m.DeadLetterReason) || !utf8.ValidString(m.DeadLetterDescription) {
		return invalid("dead-letter reason and description must be valid UTF-8 of at most %d bytes", MaxReasonLen)
	}
	return nil
}

// Validate checks an enqueue against the limits.
func (p *EnqueueParams) Validate(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if len(p.Messages) == 0 {
		return invalid("enqueue of no messages")
	}
	if len(p.Messages) > l.MaxBatch {
		return fmt.Errorf("%d messages in one batch, at most %d allowed: %w", len(p.Messages), l.MaxBatch, sluicetype.ErrBatchTooLarge)
	}
	total := 0
	for i := range p.Messages {
		m := &p.Messages[i]
		size := m.MessageSize()
		if size > l.MaxMessageBytes {
			return fmt.Errorf("message %d is %d bytes, at most %d allowed: %w", i, size, l.MaxMessageBytes, sluicetype.ErrMessageTooLarge)
		}
		total += size
		if err := m.Validate(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	if total > l.MaxBatchBytes {
		return fmt.Errorf("batch is %d bytes, at most %d allowed: %w", total, l.MaxBatchBytes, sluicetype.ErrBatchTooLarge)
	}
	return nil
}

func validateProperties(props map[string]string) error {
	for k, v := range props {
		if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalid("property %q: keys must be non-empty and keys and values valid UTF-8", k)
		}
	}
	return nil
}

// Validate checks an EnqueueAll: each queue once, and each message as an
// enqueue checks it. The batch limits (MaxBatch, MaxBatchBytes) do not
// apply: an EnqueueAll carries the copies of a send (a topic's fan-out),
// and the layer above applies the limits to what its caller sent; the
// engine writes the copies in bounded pieces, in one transaction.
func (p *EnqueueAllParams) Validate(l Limits) error {
	if len(p.Batches) == 0 && p.Routed == nil && len(p.Arrivals) == 0 {
		return invalid("enqueue to no queue")
	}
	if err := p.validateArrivals(); err != nil {
		return err
	}
	seen := make(map[string]bool, len(p.Batches))
	for i := range p.Batches {
		b := &p.Batches[i]
		if err := b.validateCopies(l); err != nil {
			return fmt.Errorf("queue %q: %w", b.Queue, err)
		}
		if seen[b.Queue] {
			return invalid("queue %q named twice", b.Queue)
		}
		seen[b.Queue] = true
	}
	if p.Routed != nil {
		return p.Routed.validate(p.Batches, l)
	}
	return nil
}

// validateArrivals checks that the arrivals name entities, come after
// earlier ones, and account for every message of the batches.
func (p *EnqueueAllParams) validateArrivals() error {
	if len(p.Arrivals) == 0 {
		if p.Through != nil {
			return invalid("enqueue with Through and no arrivals")
		}
		return nil
	}
	for i, a := range p.Arrivals {
		if err := ValidateName("queue", a.Queue); err != nil {
			return fmt.Errorf("arrival %d: %w", i, err)
		}
		if a.After < -1 || a.After >= i || a.Message < 0 {
			return invalid("arrival %d: after %d and message %d: must be an earlier arrival (or -1) and a message", i, a.After, a.Message)
		}
		if len(a.MessageID) > MaxNameLen || len(a.PartitionKey) > MaxNameLen {
			return invalid("arrival %d: message id and partition key must be at most %d bytes", i, MaxNameLen)
		}
	}
	if len(p.Through) != len(p.Batches) {
		return invalid("enqueue with arrivals for %d batches, not %d", len(p.Through), len(p.Batches))
	}
	for i, th := range p.Through {
		if len(th) != len(p.Batches[i].Messages) {
			return invalid("enqueue with %d arrivals for the %d messages of queue %q", len(th), len(p.Batches[i].Messages), p.Batches[i].Queue)
		}
		for _, a := range th {
			if a < -1 || a >= len(p.Arrivals) {
				return invalid("arrival %d of queue %q is not one of the %d", a, p.Batches[i].Queue, len(p.Arrivals))
			}
		}
	}
	return nil
}

// validateCopies checks a batch of an EnqueueAll: an enqueue's checks
// but the batch limits.
func (p *EnqueueParams) validateCopies(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if len(p.Messages) == 0 {
		return invalid("enqueue of no messages")
	}
	for i := range p.Messages {
		m := &p.Messages[i]
		if size := m.MessageSize(); size > l.MaxMessageBytes {
			return fmt.Errorf("message %d is %d bytes, at most %d allowed: %w", i, size, l.MaxMessageBytes, sluicetype.ErrMessageTooLarge)
		}
		if err := m.Validate(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return nil
}

// validate checks that a routed send accounts for every message of the
// batches that copy it.
func (r *RoutedSend) validate(batches []EnqueueParams, l Limits) error {
	if err := ValidateName("queue", r.Queue); err != nil {
		return err
	}
	if len(r.VisibleAt) == 0 || len(r.VisibleAt) > l.MaxBatch {
		return invalid("routed send of %d messages, 1 to %d allowed", len(r.VisibleAt), l.MaxBatch)
	}
	if len(r.Origins) != len(batches) {
		return invalid("routed send with origins for %d batches, not %d", len(r.Origins), len(batches))
	}
	for i, o := range r.Origins {
		if len(o) != len(batches[i].Messages) {
			return invalid("routed send with %d origins for the %d messages of queue %q", len(o), len(batches[i].Messages), batches[i].Queue)
		}
		for _, j := range o {
			if j < 0 || j >= len(r.VisibleAt) {
				return invalid("routed send: origin %d of queue %q is not one of its %d messages", j, batches[i].Queue, len(r.VisibleAt))
			}
		}
	}
	return nil
}

// Validate checks a lease.
func (p *LeaseParams) Validate(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if p.Max < 1 || p.Max > l.MaxBatch {
		return invalid("lease of %d messages: must be between 1 and %d", p.Max, l.MaxBatch)
	}
	if p.Visibility < time.Millisecond {
		return invalid("visibility timeout %v: must be at least 1ms", p.Visibility)
	}
	return nil
}

// Validate checks a settle.
func (p *SettleParams) Validate(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if len(p.Receipts) == 0 {
		return invalid("settle of no receipts")
	}
	if len(p.Receipts) > l.MaxBatch {
		return fmt.Errorf("%d receipts in one settle, at most %d allowed: %w", len(p.Receipts), l.MaxBatch, sluicetype.ErrBatchTooLarge)
	}
	switch p.Action {
	case Complete:
	case Abandon:
		if p.Delay < 0 {
			return invalid("abandon delay %v: must not be negative", p.Delay)
		}
	case DeadLetter:
		if len(p.Reason) > MaxReasonLen || len(p.Description) > MaxReasonLen ||
			!utf8.ValidString(p.Reason) || !utf8.ValidString(p.Description) {
			return invalid("dead-letter reason and description must be valid UTF-8 of at most %d bytes", MaxReasonLen)
		}
	case Extend:
		if p.Extension < time.Millisecond {
			return invalid("lease extension %v: must be at least 1ms", p.Extension)
		}
	case Defer, Release:
	default:
		return invalid("unknown settle action %d", p.Action)
	}
	if p.Properties != nil {
		if p.Action == Complete || p.Action == Extend || p.Action == Release {
			return invalid("%s cannot change properties", p.Action)
		}
		if err := validateProperties(p.Properties); err != nil {
			return err
		}
	}
	return nil
}

// MaxSessionStateLen bounds a session's state.
const MaxSessionStateLen = 256 << 10

// Validate checks an accept.
func (p *AcceptSessionParams) Validate() error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if err := validateSessionID(p.SessionID); err != nil {
		return err
	}
	if p.Duration < time.Millisecond {
		return invalid("session lock duration %v: must be at least 1ms", p.Duration)
	}
	return nil
}

func validateSessionID(id string) error {
	if len(id) > MaxNameLen || !utf8.ValidString(id) {
		return invalid("session id must be valid UTF-8 of at most %d bytes", MaxNameLen)
	}
	return nil
}

// Validate checks a session operation; renew says whether Duration
// matters.
func (p *SessionParams) Validate(renew bool) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if p.SessionID == "" {
		return invalid("empty session id")
	}
	if err := validateSessionID(p.SessionID); err != nil {
		return err
	}
	if renew && p.Duration < time.Millisecond {
		return invalid("session lock duration %v: must be at least 1ms", p.Duration)
	}
	return nil
}

// Validate checks a lease of a session's messages.
func (p *LeaseSessionParams) Validate(l Limits) error {
	if err := p.SessionParams.Validate(false); err != nil {
		return err
	}
	if p.Max < 1 || p.Max > l.MaxBatch {
		return invalid("lease of %d messages: must be between 1 and %d", p.Max, l.MaxBatch)
	}
	return nil
}

// Validate checks a session state write.
func (p *SessionStateParams) Validate() error {
	if err := p.SessionParams.Validate(false); err != nil {
		return err
	}
	if len(p.State) > MaxSessionStateLen {
		return fmt.Errorf("session state of %d bytes, at most %d allowed: %w", len(p.State), MaxSessionStateLen, sluicetype.ErrMessageTooLarge)
	}
	return nil
}

// Validate checks a listing.
func (p *ListParams) Validate(l Limits) error {
	if p.After != "" {
		if err := ValidateName("queue", p.After); err != nil {
			return err
		}
	}
	if p.Max < 1 || p.Max > l.MaxBatch {
		return invalid("list of %d queues: must be between 1 and %d", p.Max, l.MaxBatch)
	}
	if len(p.Prefix) > MaxNameLen {
		return invalid("list of the names starting with a prefix of %d bytes: at most %d", len(p.Prefix), MaxNameLen)
	}
	return nil
}

// PrefixRange returns the range [from, to) of the names that start with
// prefix, in byte order: every name for "". Names are ASCII, so the
// range ends before the first name past the prefix's last byte.
func PrefixRange(prefix string) (from, to string) {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] < 0x7f {
			return prefix, prefix[:i] + string(prefix[i]+1)
		}
	}
	return prefix, "\x7f" // no name reaches DEL
}

// Validate checks a lease of deferred messages.
func (p *LeaseDeferredParams) Validate(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if err := validateSeqs("lease of deferred messages", p.Seqs, l); err != nil {
		return err
	}
	if p.Session != nil {
		return p.Session.Validate(false)
	}
	if p.Visibility < time.Millisecond {
		return invalid("visibility timeout %v: must be at least 1ms", p.Visibility)
	}
	return nil
}

// Validate checks a cancel of scheduled messages.
func (p *CancelParams) Validate(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	return validateSeqs("cancel of scheduled messages", p.Seqs, l)
}

// validateSeqs checks a list of sequence numbers: 1 to MaxBatch of them,
// distinct, each at least 1. A number that names no message is not invalid: it is not
// found.
func validateSeqs(what string, seqs []int64, l Limits) error {
	if len(seqs) == 0 {
		return invalid("%s names no sequence number", what)
	}
	if len(seqs) > l.MaxBatch {
		return fmt.Errorf("%s names %d sequence numbers, at most %d allowed: %w", what, len(seqs), l.MaxBatch, sluicetype.ErrBatchTooLarge)
	}
	seen := make(map[int64]bool, len(seqs))
	for _, s := range seqs {
		if s < 1 {
			return invalid("%s: sequence number %d: sequence numbers start at 1", what, s)
		}
		if seen[s] {
			return invalid("%s: sequence number %d given twice", what, s)
		}
		seen[s] = true
	}
	return nil
}

// Validate checks a peek.
func (p *PeekParams) Validate(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if p.Max < 1 || p.Max > l.MaxBatch {
		return invalid("peek of %d messages: must be between 1 and %d", p.Max, l.MaxBatch)
	}
	if p.FromSeq < 0 {
		return invalid("peek from sequence number %d: must not be negative", p.FromSeq)
	}
	return nil
}

// Validate checks a browse.
func (p *BrowseParams) Validate(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if p.Max < 1 || p.Max > l.MaxBatch {
		return invalid("browse returning %d messages: must be between 1 and %d", p.Max, l.MaxBatch)
	}
	if p.Scan < 1 || p.Scan > MaxBrowseScan {
		return invalid("browse examining %d messages: must be between 1 and %d", p.Scan, MaxBrowseScan)
	}
	if p.FromSeq < 0 {
		return invalid("browse from sequence number %d: must not be negative", p.FromSeq)
	}
	return nil
}

// Validate checks a delete: sequence numbers, or a count of the oldest.
func (p *DeleteParams) Validate(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	if p.Seqs != nil {
		if p.Max != 0 || !p.Before.IsZero() {
			return invalid("delete names sequence numbers and a count or a time: choose one")
		}
		return validateSeqs("delete", p.Seqs, l)
	}
	if p.Max < 1 || p.Max > l.MaxBatch {
		return invalid("delete of the %d oldest messages: must be between 1 and %d", p.Max, l.MaxBatch)
	}
	return nil
}

// Validate checks a resubmit.
func (p *ResubmitParams) Validate(l Limits) error {
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	return validateSeqs("resubmit", p.Seqs, l)
}

// ValidatePartition checks a partition number.
func ValidatePartition(p int32) error {
	if p < 0 {
		return invalid("partition %d: must not be negative", p)
	}
	return nil
}

// Validate checks an append against the limits.
func (p *AppendParams) Validate(l Limits) error {
	if err := ValidatePartition(p.Partition); err != nil {
		return err
	}
	if len(p.Records) == 0 {
		return invalid("append of no records")
	}
	if len(p.Records) > l.MaxBatch {
		return fmt.Errorf("%d records in one batch, at most %d allowed: %w", len(p.Records), l.MaxBatch, sluicetype.ErrBatchTooLarge)
	}
	total := 0
	for i := range p.Records {
		r := &p.Records[i]
		if err := ValidateName("namespace", r.Namespace); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if err := ValidateKey(r.Key); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if err := validateProperties(r.Properties); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		size := len(r.Payload) + len(r.Namespace) + len(r.Key)
		for k, v := range r.Properties {
			size += len(k) + len(v)
		}
		if size > l.MaxMessageBytes {
			return fmt.Errorf("record %d is %d bytes, at most %d allowed: %w", i, size, l.MaxMessageBytes, sluicetype.ErrMessageTooLarge)
		}
		total += size
	}
	if total > l.MaxBatchBytes {
		return fmt.Errorf("batch is %d bytes, at most %d allowed: %w", total, l.MaxBatchBytes, sluicetype.ErrBatchTooLarge)
	}
	return nil
}

// Validate checks a read.
func (p *ReadParams) Validate(l Limits) error {
	if err := ValidatePartition(p.Partition); err != nil {
		return err
	}
	if p.After < 0 {
		return invalid("read after position %d: must not be negative", p.After)
	}
	if p.Max < 1 || p.Max > l.MaxBatch {
		return invalid("read of %d records: must be between 1 and %d", p.Max, l.MaxBatch)
	}
	if p.Through < 0 || p.Through > 0 && p.Through <= p.After {
		return invalid("read after %d through %d: through must be 0 (the head) or past after", p.After, p.Through)
	}
	if p.Namespace == "" && p.Key == "" {
		return nil
	}
	if p.Namespace == "" || p.Key == "" {
		return invalid("read of a stream needs both its namespace (%q) and its key (%q)", p.Namespace, p.Key)
	}
	if err := ValidateName("namespace", p.Namespace); err != nil {
		return err
	}
	return ValidateKey(p.Key)
}

// Truncate shortens s to at most n bytes without splitting a UTF-8
// character, for texts (reasons, errors) stored in bounded columns.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
