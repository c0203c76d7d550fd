package sqs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server/internal/sigv4"
)

// Error is an SQS error response: Code is the error's shape name (its
// __type), QueryCode the older query protocol's code that SDKs read from
// the x-amzn-query-error header (Code when empty), Status the HTTP
// status.
type Error struct {
	Code      string
	QueryCode string
	Status    int
	Message   string
	// Server marks a fault of the service rather than of the sender.
	Server bool
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// ErrThrottled is what Key.Admit and Config.Wait return (wrapped) when a
// key is over a bound: the request fails with RequestThrottled.
var ErrThrottled = errors.New("throttled")

// codeAccessDenied is SQS's error for a request its key may not make.
const codeAccessDenied = "AccessDenied"

func queueDoesNotExist(queue string) *Error {
	return &Error{Code: "QueueDoesNotExist", QueryCode: "AWS.SimpleQueueService.NonExistentQueue", Status: http.StatusBadRequest,
		Message: fmt.Sprintf("the queue %q does not exist", queue)}
}

func queueNameExists(queue string) *Error {
	return &Error{Code: "QueueNameExists", QueryCode: "QueueAlreadyExists", Status: http.StatusBadRequest,
		Message: fmt.Sprintf("a queue named %q exists with other attributes", queue)}
}

func invalidParameter(format string, args ...any) *Error {
	return &Error{Code: "InvalidParameterValue", Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

func missingParameter(name string) *Error {
	return &Error{Code: "MissingParameter", Status: http.StatusBadRequest, Message: fmt.Sprintf("the request must hold %s", name)}
}

func invalidAttributeName(format string, args ...any) *Error {
	return &Error{Code: "InvalidAttributeName", Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

func invalidAttributeValue(format string, args ...any) *Error {
	return &Error{Code: "InvalidAttributeValue", Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

func receiptHandleIsInvalid(handle string) *Error {
	return &Error{Code: "ReceiptHandleIsInvalid", Status: http.StatusNotFound,
		Message: fmt.Sprintf("the receipt handle %q is not one this endpoint gave", truncate(handle, 64))}
}

func messageNotInflight() *Error {
	return &Error{Code: "MessageNotInflight", QueryCode: "AWS.SimpleQueueService.MessageNotInflight", Status: http.StatusBadRequest,
		Message: "the message is not in flight: its visibility timeout ended, or it was deleted"}
}

func unsupported(format string, args ...any) *Error {
	return &Error{Code: "UnsupportedOperation", QueryCode: "AWS.SimpleQueueService.UnsupportedOperation", Status: http.StatusBadRequest,
		Message: fmt.Sprintf(format, args...)}
}

func resourceNotFound(format string, args ...any) *Error {
	return &Error{Code: "ResourceNotFoundException", Status: http.StatusNotFound, Message: fmt.Sprintf(format, args...)}
}

// Batch request errors.
func emptyBatch() *Error {
	return &Error{Code: "EmptyBatchRequest", QueryCode: "AWS.SimpleQueueService.EmptyBatchRequest", Status: http.StatusBadRequest,
		Message: "the batch holds no entries"}
}

func tooManyEntries(n int) *Error {
	return &Error{Code: "TooManyEntriesInBatchRequest", QueryCode: "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
		Status: http.StatusBadRequest, Message: fmt.Sprintf("the batch holds %d entries: at most %d", n, maxBatch)}
}

func idsNotDistinct(id string) *Error {
	return &Error{Code: "BatchEntryIdsNotDistinct", QueryCode: "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
		Status: http.StatusBadRequest, Message: fmt.Sprintf("two entries have the id %q", id)}
}

func invalidBatchEntryID(id string) *Error {
	return &Error{Code: "InvalidBatchEntryId", QueryCode: "AWS.SimpleQueueService.InvalidBatchEntryId", Status: http.StatusBadRequest,
		Message: fmt.Sprintf("the entry id %q is not 1 to 80 letters, digits, '-' and '_'", truncate(id, 100))}
}

func batchTooLong(n int) *Error {
	return &Error{Code: "BatchRequestTooLong", QueryCode: "AWS.SimpleQueueService.BatchRequestTooLong", Status: http.StatusBadRequest,
		Message: fmt.Sprintf("the batch's messages hold %d bytes: at most %d together", n, maxBatchBytes)}
}

// asError turns an operation's error into the response it gets: an
// *Error as it is, a signature's or sluice's error as SQS names its
// kind, anything else as InternalFailure (its text logged, not sent).
func asError(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, sigv4.ErrMissing):
		return &Error{Code: "MissingAuthenticationToken", Status: http.StatusForbidden,
			Message: "the request is not signed: sign it with AWS Signature Version 4 and a key of the server's configuration"}
	case errors.Is(err, sigv4.ErrMalformed):
		return &Error{Code: "IncompleteSignature", Status: http.StatusBadRequest, Message: err.Error()}
	case errors.Is(err, sigv4.ErrUnknownKey):
		return &Error{Code: "InvalidClientTokenId", Status: http.StatusForbidden,
			Message: "the access key id names no key of the server's configuration that has a token (a key given only by token_sha256 cannot sign)"}
	case errors.Is(err, sigv4.ErrExpired):
		return &Error{Code: "RequestExpired", Status: http.StatusBadRequest, Message: err.Error()}
	case errors.Is(err, sigv4.ErrSignature):
		return &Error{Code: "SignatureDoesNotMatch", Status: http.StatusForbidden, Message: err.Error()}
	case errors.Is(err, ErrThrottled):
		return &Error{Code: "RequestThrottled", Status: http.StatusForbidden, Message: err.Error()}
	case errors.Is(err, sluice.ErrEntityNotFound):
		return &Error{Code: "QueueDoesNotExist", QueryCode: "AWS.SimpleQueueService.NonExistentQueue", Status: http.StatusBadRequest,
			Message: "the queue does not exist"}
	case errors.Is(err, sluice.ErrMessageTooLarge):
		return invalidParameter("%v", err)
	case errors.Is(err, sluice.ErrInvalidArgument), errors.Is(err, sluice.ErrInvalidName):
		return invalidParameter("%v", err)
	case errors.Is(err, sluice.ErrContention):
		return &Error{Code: "ServiceUnavailable", Status: http.StatusServiceUnavailable, Server: true,
			Message: "the database is too busy: retry"}
	}
	return &Error{Code: "InternalFailure", Status: http.StatusInternalServerError, Server: true,
		Message: "the request failed inside the server: its log says why"}
}

// writeError writes e as the JSON protocol's error response, with the
// query-compatible code SDKs prefer.
func writeError(w http.ResponseWriter, e *Error) {
	query := e.QueryCode
	if query == "" {
		query = e.Code
	}
	fault := "Sender"
	if e.Server {
		fault = "Receiver"
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Amzn-Query-Error", query+";"+fault)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{"com.amazonaws.sqs#" + e.Code, e.Message})
}

// truncate shortens s for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
