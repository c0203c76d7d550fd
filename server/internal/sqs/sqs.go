// Package sqs serves a sluice client's queues over Amazon SQS's JSON
// protocol (the AmazonSQS.* targets that current AWS SDKs send), so that
// code written against SQS runs on sluice unchanged: the server mounts
// it on its own address (`sluice serve --sqs-addr`).
//
// A standard SQS queue is a sluice queue: SendMessage sends, a receipt
// handle is a lock token, DeleteMessage completes, a VisibilityTimeout is
// the receive's lock (ReceiverOptions.LockDuration) and
// ChangeMessageVisibility renews or abandons it. What SQS keeps that
// sluice has no setting for (DelaySeconds, ReceiveMessageWaitTimeSeconds,
// a visibility timeout past sluice's longest lock) is kept in the queue's
// UserMetadata. Requests are signed with AWS Signature Version 4 against
// the server's keys: the access key id is a key's name and the secret its
// token, so a key's grants apply as they do to the native API.
//
// docs/architecture.md, "SQS on sluice", maps every operation.
package sqs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server/internal/sigv4"
)

// Permission is what a request needs of its key on a queue.
type Permission uint8

// Permissions, as the server's keys grant them.
const (
	Send Permission = 1 << iota
	Receive
	Manage
)

// Key is a server key as the endpoint sees it.
type Key interface {
	// Secret is the key's token: the secret access key requests are
	// signed with ("" when the configuration holds only its digest, and
	// the key cannot sign).
	Secret() string
	// Allows reports whether the key holds p on the queue (a canonical
	// name); with p zero, whether it holds any permission on it.
	Allows(p Permission, queue string) bool
	// Admit counts a request against the key's rate limit, and fails
	// when it is over.
	Admit() error
}

// Config configures a Handler.
type Config struct {
	// Client is the library client whose queues are served (required).
	Client *sluice.Client
	// Key returns the key an access key id names (ok false: none). Nil
	// serves without authentication, as the server does without keys:
	// signatures are not checked.
	Key func(accessKeyID string) (k Key, ok bool)
	// Wait bounds a long poll of up to d: the context the receive waits
	// in, or an error when the key may not wait now (k is nil without
	// authentication). Nil waits d under the request's context.
	Wait func(ctx context.Context, k Key, d time.Duration) (context.Context, context.CancelFunc, error)
	// Context ends with the server: background work (message move
	// tasks) stops with it (default: never).
	Context context.Context
	// MaxRequestBytes bounds a request's body (default 16 MiB).
	MaxRequestBytes int
	// Logger receives refusals (at a bounded rate) and failures.
	Logger *slog.Logger
}

// Handler serves the SQS JSON protocol.
type Handler struct {
	cfg      Config
	c        *sluice.Client
	log      *slog.Logger
	refusals *rate.Limiter
	ops      map[string]operation
	cache    queueCache
	redrive  redriveIndex
	moves    moveTasks
	attempts attempts
	// changing serializes SetQueueAttributes of a queue (by its name's
	// hash).
	changing [64]sync.Mutex
}

// operation serves one target: it decodes its request from body and
// returns its response, or an error (an *Error, or one that becomes
// InternalFailure).
type operation func(ctx context.Context, rq *request, body []byte) (any, error)

// request is what an operation knows of its caller.
type request struct {
	key       Key    // nil without authentication
	accessKey string // the key's name ("" without authentication)
	base      string
	region    string
}

// New returns a handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("sluice: sqs: no client")
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 16 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	h := &Handler{cfg: cfg, c: cfg.Client, log: cfg.Logger, refusals: rate.NewLimiter(1, 10)}
	h.ops = map[string]operation{
		"CreateQueue":                  h.createQueue,
		"GetQueueUrl":                  h.getQueueURL,
		"ListQueues":                   h.listQueues,
		"DeleteQueue":                  h.deleteQueue,
		"GetQueueAttributes":           h.getQueueAttributes,
		"SetQueueAttributes":           h.setQueueAttributes,
		"PurgeQueue":                   h.purgeQueue,
		"SendMessage":                  h.sendMessage,
		"SendMessageBatch":             h.sendMessageBatch,
		"ReceiveMessage":               h.receiveMessage,
		"DeleteMessage":                h.deleteMessage,
		"DeleteMessageBatch":           h.deleteMessageBatch,
		"ChangeMessageVisibility":      h.changeMessageVisibility,
		"ChangeMessageVisibilityBatch": h.changeMessageVisibilityBatch,
		"ListDeadLetterSourceQueues":   h.listDeadLetterSourceQueues,
		"StartMessageMoveTask":         h.startMessageMoveTask,
		"ListMessageMoveTasks":         h.listMessageMoveTasks,
		"CancelMessageMoveTask":        h.cancelMessageMoveTask,
		"TagQueue":                     h.tagQueue,
		"UntagQueue":                   h.untagQueue,
		"ListQueueTags":                h.listQueueTags,
	}
	return h, nil
}

// targetPrefix starts every X-Amz-Target the endpoint serves.
const targetPrefix = "AmazonSQS."

// ServeHTTP serves one request: POST / with an X-Amz-Target naming the
// operation and a JSON body.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// A bug in one request must not take the server down.
		if v := recover(); v != nil {
			h.log.Error("sluice: sqs: a request panicked", "target", r.Header.Get("X-Amz-Target"), "panic", v)
			writeError(w, &Error{Code: "InternalFailure", Status: http.StatusInternalServerError, Server: true,
				Message: "the request failed inside the server: its log says why"})
		}
	}()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, &Error{Code: "InvalidAction", Status: http.StatusMethodNotAllowed,
			Message: "the SQS endpoint serves POST requests of the JSON protocol (X-Amz-Target: AmazonSQS.<Action>)"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.cfg.MaxRequestBytes)))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, &Error{Code: "RequestEntityTooLarge", Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("the request's body is over %d bytes", h.cfg.MaxRequestBytes)})
			return
		}
		writeError(w, &Error{Code: "MalformedRequest", Status: http.StatusBadRequest, Message: "reading the request's body: " + err.Error()})
		return
	}
	rq := &request{base: baseURL(r), region: "us-east-1"}
	if h.cfg.Key != nil {
		cred, k, err := h.authenticate(r, body)
		if err != nil {
			h.refused(r, cred.AccessKeyID, err)
			writeError(w, asError(err))
			return
		}
		rq.key, rq.accessKey = k, cred.AccessKeyID
		if validRegion(cred.Region) {
			rq.region = cred.Region
		}
	} else if region := scopeRegion(r.Header.Get("Authorization")); region != "" {
		rq.region = region
	}
	target := r.Header.Get("X-Amz-Target")
	name, ok := strings.CutPrefix(target, targetPrefix)
	op := h.ops[name]
	if !ok || op == nil {
		writeError(w, &Error{Code: "UnknownOperationException", QueryCode: "InvalidAction", Status: http.StatusBadRequest,
			Message: fmt.Sprintf("the action %q is not served by this endpoint (X-Amz-Target %q)", truncate(name, 100), truncate(target, 120))})
		return
	}
	out, err := op(r.Context(), rq, body)
	if err != nil {
		e := asError(err)
		if e.Code == codeAccessDenied {
			h.refused(r, rq.accessKey, err)
		}
		if e.Status >= 500 {
			h.log.Error("sluice: sqs: "+name, "err", err)
		}
		writeError(w, e)
		return
	}
	w.Header().Set("Content-Type", contentType)
	if err := json.NewEncoder(w).Encode(out); err != nil {
		h.log.Debug("sluice: sqs: writing a response", "action", name, "err", err)
	}
}

// contentType is the JSON protocol's, for requests and responses alike.
const contentType = "application/x-amz-json-1.0"

// authenticate verifies a request's signature and returns its key,
// within the key's rate limit.
func (h *Handler) authenticate(r *http.Request, body []byte) (sigv4.Credential, Key, error) {
	var k Key
	cred, err := sigv4.Verify(r, body, "sqs", func(id string) (string, bool) {
		found, ok := h.cfg.Key(id)
		if !ok || found.Secret() == "" {
			return "", false
		}
		k = found
		return found.Secret(), true
	}, time.Now())
	if err != nil {
		return cred, nil, err
	}
	if err := k.Admit(); err != nil {
		return cred, k, err
	}
	return cred, k, nil
}

// refused logs a refused request, at a bounded rate.
func (h *Handler) refused(r *http.Request, keyName string, err error) {
	if h.refusals.Allow() {
		h.log.Warn("sluice: sqs: request refused", "remote", r.RemoteAddr, "key", keyName,
			"target", r.Header.Get("X-Amz-Target"), "err", err)
	}
}

// authorize fails with AccessDenied unless the request's key holds p on
// queue.
func (rq *request) authorize(p Permission, queue string) error {
	if rq.key == nil || rq.key.Allows(p, queue) {
		return nil
	}
	return &Error{Code: codeAccessDenied, Status: http.StatusForbidden,
		Message: fmt.Sprintf("the key may not %s queue %q", permissionName(p), queue)}
}

func permissionName(p Permission) string {
	switch p {
	case Send:
		return "send to"
	case Receive:
		return "receive from"
	case Manage:
		return "manage"
	}
	return "use"
}

// baseURL is the scheme and host the request came to, for queue URLs.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// scopeRegion is the region an Authorization header's credential scope
// names ("" when it names none), for ARNs of a server without keys.
func scopeRegion(authorization string) string {
	_, cred, ok := strings.Cut(authorization, "Credential=")
	if !ok {
		return ""
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || !validRegion(parts[2]) {
		return ""
	}
	return parts[2]
}

// validRegion reports whether s can stand in an ARN as a region.
func validRegion(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// intParam is an optional integer parameter's value: def when it is
// absent, and InvalidParameterValue outside [lo, hi].
func intParam(name string, v *int, def, lo, hi int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < lo || *v > hi {
		return 0, invalidParameter("%s %d: must be from %d to %d", name, *v, lo, hi)
	}
	return *v, nil
}

// decode reads an operation's request, refusing unknown fields as SQS
// does (a misspelt field would otherwise change nothing).
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return invalidParameter("the request's body is not a valid request of this action: %v", err)
	}
	if d.More() {
		return invalidParameter("the request's body holds more than one JSON value")
	}
	return nil
}
