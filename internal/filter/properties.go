package filter

import "strings"

// Properties are what a filter sees of a message: its system properties
// and its application properties, never its body.
type Properties struct {
	// System holds the system properties, which filters reach as sys.Name.
	System SystemProperties
	// App holds the application properties, which filters reach by name
	// alone or as user.name; an absent name is NULL. A nil map has none.
	App map[string]string
}

// SystemProperties are the system properties of a message that filters
// can test, as sys.MessageId, sys.Subject and so on. An empty string is
// NULL: the property is unset.
type SystemProperties struct {
	MessageID        string // sys.MessageId
	CorrelationID    string // sys.CorrelationId
	Subject          string // sys.Subject, or its alias sys.Label
	To               string // sys.To
	ReplyTo          string // sys.ReplyTo
	ReplyToSessionID string // sys.ReplyToSessionId
	SessionID        string // sys.SessionId
	PartitionKey     string // sys.PartitionKey
	ContentType      string // sys.ContentType
}

// systemProperty identifies one of the system properties.
type systemProperty uint8

const (
	sysMessageID systemProperty = iota
	sysCorrelationID
	sysSubject
	sysTo
	sysReplyTo
	sysReplyToSessionID
	sysSessionID
	sysPartitionKey
	sysContentType
)

// systemPropertyNames lists the names sys. accepts, as canonically
// spelled; "Label" is an alias of "Subject".
const systemPropertyNames = "MessageId, CorrelationId, Subject (or Label), To, ReplyTo, ReplyToSessionId, SessionId, PartitionKey, ContentType"

// lookupSystemProperty finds the system property name stands for, in any
// case, and returns it with its canonical spelling.
func lookupSystemProperty(name string) (systemProperty, string, bool) {
	for _, p := range [...]struct {
		name string
		prop systemProperty
	}{
		{"MessageId", sysMessageID},
		{"CorrelationId", sysCorrelationID},
		{"Subject", sysSubject},
		{"Label", sysSubject},
		{"To", sysTo},
		{"ReplyTo", sysReplyTo},
		{"ReplyToSessionId", sysReplyToSessionID},
		{"SessionId", sysSessionID},
		{"PartitionKey", sysPartitionKey},
		{"ContentType", sysContentType},
	} {
		if strings.EqualFold(name, p.name) {
			return p.prop, p.name, true
		}
	}
	return 0, "", false
}

// get returns the value of system property p and whether it is set.
func (s *SystemProperties) get(p systemProperty) (string, bool) {
	var v string
	switch p {
	case sysMessageID:
		v = s.MessageID
	case sysCorrelationID:
		v = s.CorrelationID
	case sysSubject:
		v = s.Subject
	case sysTo:
		v = s.To
	case sysReplyTo:
		v = s.ReplyTo
	case sysReplyToSessionID:
		v = s.ReplyToSessionID
	case sysSessionID:
		v = s.SessionID
	case sysPartitionKey:
		v = s.PartitionKey
	case sysContentType:
		v = s.ContentType
	}
	return v, v != ""
}
