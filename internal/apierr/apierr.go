// Package apierr maps sluice's sentinel errors to the network API's
// status codes and reasons and back: the server reports each condition
// the library names as a Connect error with an ErrorInfo detail, and the
// Go client turns that detail back into the same sentinel, so that
// errors.Is works the same over the network as in process.
package apierr

import (
	"cmp"
	"context"
	"errors"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectproto"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/sluicetype"
)

// ErrRateLimited is returned, to a client, for a call its key's rate
// limit refused.
var ErrRateLimited = errors.New("rate limited")

// condition is a named condition: a sentinel, its status code and its
// reason.
type condition struct {
	err    error
	code   connect.Code
	reason string
}

// wireMessages replace, on the wire, the text of errors that wrap the
// database driver's: it names the database's address, and tells a client
// nothing the reason does not.
var wireMessages = map[error]string{
	sluicetype.ErrOutcomeUnknown: "outcome unknown: the connection to the database broke before the write's reply, " +
		"so it may have been applied (a send retried with its MessageID to an entity with duplicate detection is stored once)",
	sluicetype.ErrContention: "database contention persisted: nothing was written; retry",
}

// conditions are tried in order: the more specific first (a lost session
// lock wraps a lost message lock; an unknown outcome wraps whatever broke
// the connection).
var conditions = []condition{
	{sluicetype.ErrOutcomeUnknown, connect.CodeUnavailable, "OUTCOME_UNKNOWN"},
	{sluicetype.ErrSessionLockLost, connect.CodeFailedPrecondition, "SESSION_LOCK_LOST"},
	{sluicetype.ErrLockLost, connect.CodeFailedPrecondition, "LOCK_LOST"},
	{sluicetype.ErrSessionCannotBeLocked, connect.CodeAborted, "SESSION_CANNOT_BE_LOCKED"},
	{sluicetype.ErrSessionRequired, connect.CodeFailedPrecondition, "SESSION_REQUIRED"},
	{sluicetype.ErrEntityNotFound, connect.CodeNotFound, "ENTITY_NOT_FOUND"},
	{sluicetype.ErrEntityExists, connect.CodeAlreadyExists, "ENTITY_EXISTS"},
	{sluicetype.ErrMessageNotFound, connect.CodeNotFound, "MESSAGE_NOT_FOUND"},
	{sluicetype.ErrSubscriptionNotFound, connect.CodeNotFound, "SUBSCRIPTION_NOT_FOUND"},
	{sluicetype.ErrMessageTooLarge, connect.CodeInvalidArgument, "MESSAGE_TOO_LARGE"},
	{sluicetype.ErrBatchTooLarge, connect.CodeInvalidArgument, "BATCH_TOO_LARGE"},
	{sluicetype.ErrInvalidName, connect.CodeInvalidArgument, "INVALID_NAME"},
	{sluicetype.ErrInvalidFilter, connect.CodeInvalidArgument, "INVALID_FILTER"},
	{sluicetype.ErrInvalidArgument, connect.CodeInvalidArgument, "INVALID_ARGUMENT"},
	{sluicetype.ErrTrimmed, connect.CodeOutOfRange, "TRIMMED"},
	{sluicetype.ErrFenced, connect.CodeAborted, "FENCED"},
	{sluicetype.ErrPartitionCount, connect.CodeFailedPrecondition, "PARTITION_COUNT"},
	{sluicetype.ErrConsumerConflict, connect.CodeFailedPrecondition, "CONSUMER_CONFLICT"},
	{sluicetype.ErrSingleNode, connect.CodeFailedPrecondition, "SINGLE_NODE"},
	{sluicetype.ErrPartitionNotPulled, connect.CodeFailedPrecondition, "PARTITION_NOT_PULLED"},
	{sluicetype.ErrContention, connect.CodeUnavailable, "CONTENTION"},
	{sluicetype.ErrClosed, connect.CodeUnavailable, "CLOSED"},
	{ErrRateLimited, connect.CodeResourceExhausted, "RATE_LIMITED"},
}

// FromLibrary turns an error of the library into the error a handler
// returns: a named condition keeps its message (the library's messages
// say what was wrong and carry no secrets) under its code and reason; a
// context's end is reported as such; anything else is an internal error
// whose text stays on the server (internal is true: log it).
func FromLibrary(err error) (_ *connect.Error, internal bool) {
	if c, ok := conditionOf(err); ok {
		return New(c.code, c.reason, cmp.Or(wireMessages[c.err], err.Error())).WithCause(err), false
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, "deadline exceeded").WithCause(err), false
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, "canceled").WithCause(err), false
	}
	return connect.NewError(connect.CodeInternal, "internal error").WithCause(err), true
}

// Reason returns the reason of the condition err names ("LOCK_LOST",
// say), or "" when sluice names none.
func Reason(err error) string {
	c, _ := conditionOf(err)
	return c.reason
}

// conditionOf returns the first condition err names.
func conditionOf(err error) (condition, bool) {
	for _, c := range conditions {
		if errors.Is(err, c.err) {
			return c, true
		}
	}
	return condition{}, false
}

// FromReason is ToLibrary for a reason and a message that came apart
// from a call's error (a SettleFailure's): an error with message as its
// text that wraps the sentinel of reason, when it has one.
func FromReason(reason, message string) error {
	for _, c := range conditions {
		if c.reason == reason {
			return &reasonError{msg: message, sentinel: c.err}
		}
	}
	return errors.New(message)
}

// reasonError is a server's message with the sentinel of its reason.
type reasonError struct {
	msg      string
	sentinel error
}

func (e *reasonError) Error() string { return e.msg }
func (e *reasonError) Unwrap() error { return e.sentinel }

// New returns an error with a code, a reason and a public message.
func New(code connect.Code, reason, message string) *connect.Error {
	e := connect.NewError(code, message)
	if d, err := connectproto.NewErrorDetail(&sluicev1.ErrorInfo{Reason: reason}); err == nil {
		e = e.WithDetail(d)
	}
	return e
}

// Invalid returns an INVALID_ARGUMENT error for a request the library
// never saw (a field the API defines, out of range).
func Invalid(message string) *connect.Error {
	return New(connect.CodeInvalidArgument, "INVALID_ARGUMENT", message)
}

// ToLibrary turns an error a client received into one that wraps the
// library's sentinel for its reason, when it has one, or the context's
// error for a deadline or a cancellation; other errors come back as they
// are.
func ToLibrary(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Code() {
	case connect.CodeDeadlineExceeded:
		return &remoteError{err: ce, sentinel: context.DeadlineExceeded}
	case connect.CodeCanceled:
		return &remoteError{err: ce, sentinel: context.Canceled}
	}
	for _, d := range ce.Details() {
		msg, derr := connectproto.UnmarshalErrorDetail(d)
		info, ok := msg.(*sluicev1.ErrorInfo)
		if derr != nil || !ok {
			continue
		}
		for _, c := range conditions {
			if c.reason == info.Reason {
				return &remoteError{err: ce, sentinel: c.err}
			}
		}
	}
	return err
}

// remoteError is a server's error as the client returns it: its text is
// the server's, and errors.Is matches the sentinel it names as well as
// the Connect error itself.
type remoteError struct {
	err      *connect.Error
	sentinel error
}

func (e *remoteError) Error() string   { return e.err.Message() }
func (e *remoteError) Unwrap() []error { return []error{e.sentinel, e.err} }
