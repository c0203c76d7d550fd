package cli

import (
	"errors"
	"strings"

	"connectrpc.com/connect/v2"

	"github.com/sluicehq/sluice"
)

// errorLine is what a failed command prints: one "sluice NAME:" prefix,
// then the condition without the library's own "sluice: " prefixes or a
// repeat of the command's verb, then the fix when there is a known one.
func errorLine(name string, err error) string {
	msg := strings.ReplaceAll(err.Error(), "sluice: ", "")
	words := strings.Fields(name)
	verb := words[len(words)-1]
	for _, prefix := range []string{name + ": ", verb + ": "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	line := "sluice " + name + ": " + msg
	if h := hint(name, err); h != "" {
		line += "\n  hint: " + h
	}
	return line
}

// hint says how to get past err, for the errors a command line can fix.
func hint(name string, err error) string {
	code := connect.CodeOf(err)
	switch {
	case code == connect.CodeUnauthenticated:
		return "give the server a key: --token TOKEN, or SLUICE_TOKEN, or a context that holds one (context add NAME --server URL --token TOKEN)"
	case code == connect.CodePermissionDenied:
		return "the key's grants do not cover this: use a key with the permission (the server's keys section)"
	case errors.Is(err, sluice.ErrSessionRequired) && name == "receive":
		return "the queue requires sessions: --session ID receives one session, --session next the next with messages"
	case errors.Is(err, sluice.ErrSessionRequired):
		return "the queue requires sessions: give each message --session-id"
	case errors.Is(err, sluice.ErrSessionLockLost):
		return "the session lock ended (released or expired): receive the session again with receive --session"
	case errors.Is(err, sluice.ErrLockLost):
		return "the lock ended (the message was settled, or its lock expired): receive the message again"
	case errors.Is(err, sluice.ErrSessionCannotBeLocked):
		return "another receiver holds the session: wait for it to release it, or give its --session-token"
	case errors.Is(err, sluice.ErrSubscriptionNotFound):
		return "stream subscriptions NAMESPACE KEY lists a stream's subscriptions"
	case errors.Is(err, sluice.ErrEntityNotFound) && strings.HasPrefix(name, "subscription"):
		return "subscription list TOPIC lists a topic's subscriptions"
	case errors.Is(err, sluice.ErrEntityNotFound) && strings.HasPrefix(name, "topic"):
		return "topic list lists the topics"
	case errors.Is(err, sluice.ErrEntityNotFound):
		return "queue list and topic list show what exists here; an ENTITY of a topic is TOPIC/Subscriptions/NAME"
	case errors.Is(err, sluice.ErrEntityExists) && strings.HasSuffix(name, " create"):
		return "--if-not-exists succeeds on one that exists; " + strings.TrimSuffix(name, " create") + " update changes its settings"
	case errors.Is(err, sluice.ErrRetentionGap):
		return "stream reposition moves the subscription past the gap; stream clear-fault resumes it"
	}
	return ""
}
