package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// emit prints v as one line of JSON.
func (e *env) emit(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table returns a writer that aligns tab-separated columns; Flush it.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// when formats a time for people: UTC, to the millisecond; "-" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// orNone formats for people a duration whose zero, or sluice.Forever,
// means none (a default TTL or dead-letter retention: never).
func orNone(d time.Duration) string {
	if d == 0 || d == sluice.Forever {
		return "none"
	}
	return d.String()
}

// orDash shows an empty string as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// bodyText is a body for people: its text when valid UTF-8, else its
// base64 with a marker.
func bodyText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return "(base64) " + base64.StdEncoding.EncodeToString(b)
}

// body is a body in JSON: "body" when valid UTF-8, else "body_base64".
type body struct {
	Text   *string `json:"body,omitempty"`
	Base64 *string `json:"bodyBase64,omitempty"`
}

func bodyOf(b []byte) body {
	s := string(b)
	if utf8.Valid(b) {
		return body{Text: &s}
	}
	s = base64.StdEncoding.EncodeToString(b)
	return body{Base64: &s}
}

// messageView is a received or peeked message as --json prints it: the
// system properties that are set, the application properties, and the
// body. Times are in UTC.
type messageView struct {
	SequenceNumber        int64             `json:"sequenceNumber"`
	DeliveryCount         int               `json:"deliveryCount"`
	EnqueuedTime          time.Time         `json:"enqueuedTime"`
	State                 string            `json:"state,omitempty"`
	ExpiresAt             time.Time         `json:"expiresAt,omitzero"`
	ScheduledEnqueueTime  time.Time         `json:"scheduledEnqueueTime,omitzero"`
	DelayedUntil          time.Time         `json:"delayedUntil,omitzero"`
	LockToken             string            `json:"lockToken,omitempty"`
	LockedUntil           time.Time         `json:"lockedUntil,omitzero"`
	SessionLockToken      string            `json:"sessionLockToken,omitempty"`
	MessageID             string            `json:"messageId,omitempty"`
	SessionID             string            `json:"sessionId,omitempty"`
	PartitionKey          string            `json:"partitionKey,omitempty"`
	CorrelationID         string            `json:"correlationId,omitempty"`
	Subject               string            `json:"subject,omitempty"`
	ContentType           string            `json:"contentType,omitempty"`
	ReplyTo               string            `json:"replyTo,omitempty"`
	ReplyToSessionID      string            `json:"replyToSessionId,omitempty"`
	To                    string            `json:"to,omitempty"`
	DeadLetterReason      string            `json:"deadLetterReason,omitempty"`
	DeadLetterDescription string            `json:"deadLetterDescription,omitempty"`
	DeadLetterSource      string            `json:"deadLetterSource,omitempty"`
	Properties            map[string]string `json:"applicationProperties,omitempty"`
	body
	raw []byte
}

func viewOf(m *sluice.ReceivedMessage) *messageView {
	return &messageView{
		SequenceNumber: m.SequenceNumber, DeliveryCount: m.DeliveryCount, EnqueuedTime: m.EnqueuedTime.UTC(),
		ExpiresAt: m.ExpiresAt.UTC(), ScheduledEnqueueTime: m.ScheduledEnqueueTime.UTC(),
		DelayedUntil: m.DelayedUntil.UTC(), LockToken: m.LockToken, LockedUntil: m.LockedUntil.UTC(),
		MessageID: m.MessageID, SessionID: m.SessionID, PartitionKey: m.PartitionKey,
		CorrelationID: m.CorrelationID, Subject: m.Subject, ContentType: m.ContentType,
		ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID, To: m.To,
		DeadLetterReason: m.DeadLetterReason, DeadLetterDescription: m.DeadLetterDescription,
		DeadLetterSource: m.DeadLetterSource, Properties: m.ApplicationProperties,
		body: bodyOf(m.Body), raw: m.Body,
	}
}

// printMessage prints a message: a JSON line, or a header line and one
// line for each thing set, the body last.
func (e *env) printMessage(v *messageView) error {
	if e.json {
		return e.emit(v)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "message #%d (delivery %d, enqueued %s)\n", v.SequenceNumber, v.DeliveryCount, when(v.EnqueuedTime))
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(&b, "  %s: %s\n", label, value)
		}
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return when(t)
	}
	line("state", v.State)
	line("expires", at(v.ExpiresAt))
	line("scheduled for", at(v.ScheduledEnqueueTime))
	line("delayed until", at(v.DelayedUntil))
	line("lock token", v.LockToken)
	line("locked until", at(v.LockedUntil))
	line("session lock token", v.SessionLockToken)
	for _, p := range [...][2]string{
		{"message id", v.MessageID}, {"session id", v.SessionID}, {"partition key", v.PartitionKey},
		{"correlation id", v.CorrelationID}, {"subject", v.Subject}, {"content type", v.ContentType},
		{"reply to", v.ReplyTo}, {"reply-to session id", v.ReplyToSessionID}, {"to", v.To},
		{"dead-letter reason", v.DeadLetterReason}, {"dead-letter description", v.DeadLetterDescription},
		{"dead-letter source", v.DeadLetterSource},
	} {
		line(p[0], p[1])
	}
	for _, k := range slices.Sorted(maps.Keys(v.Properties)) {
		fmt.Fprintf(&b, "  property %s: %s\n", k, v.Properties[k])
	}
	fmt.Fprintf(&b, "  body: %s\n", bodyText(v.raw))
	_, err := io.WriteString(e.stdout, b.String())
	return err
}
