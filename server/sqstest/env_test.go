package sqstest

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/libtest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/internal/servertest"
)

// Keys of the test servers: an administrator, a key that may only send
// to orders-*, one that may only receive from them, and one that may do
// anything to mine-*.
const (
	adminSecret    = "admin-secret-0123456789"
	senderSecret   = "sender-secret-0123456789"
	receiverSecret = "receiver-secret-0123456789"
	managerSecret  = "manager-secret-0123456789"
)

var testKeys = []server.Key{
	{Name: "admin", Token: adminSecret, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
	{Name: "sender", Token: senderSecret, Grants: []server.Grant{{Actions: server.Send, Entities: []string{"orders-*"}}}},
	{Name: "receiver", Token: receiverSecret, Grants: []server.Grant{{Actions: server.Receive, Entities: []string{"orders-*"}}}},
	{Name: "manager", Token: managerSecret, Grants: []server.Grant{{Actions: server.All, Entities: []string{"mine-*"}}}},
}

// env is a sluice server with its SQS endpoint, over a fresh tenant.
type env struct {
	addr string // the SQS endpoint's
	api  string // the URL of the server's native API
	lib  *sluice.Client
	sqs  *sqs.Client // the admin's
}

// forEachBackend runs f against a server on each backend.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env)) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		f(t, start(t, c, server.Config{Keys: testKeys}))
	})
}

// start serves c with the SQS endpoint on a free loopback port.
func start(t testing.TB, c *sluice.Client, cfg server.Config) *env {
	t.Helper()
	cfg.SQSAddr = "127.0.0.1:0"
	srv := servertest.Serve(t, c, cfg)
	e := &env{addr: srv.Srv.SQSAddr().String(), api: srv.URL, lib: c}
	e.sqs = e.client("admin", adminSecret)
	return e
}

// client is an SDK client of the endpoint signing with a key.
func (e *env) client(id, secret string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String("http://" + e.addr),
		Credentials:  credentials.NewStaticCredentialsProvider(id, secret, ""),
		// A refusal is what the tests look at: no retries hide it.
		RetryMaxAttempts: 1,
	})
}

// createQueue creates a queue and returns its URL.
func (e *env) createQueue(t *testing.T, name string, attrs map[string]string) string {
	t.Helper()
	out, err := e.sqs.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("CreateQueue(%s): %v", name, err)
	}
	return *out.QueueUrl
}

// wantCode checks that err is the SDK's error of an SQS error code (the
// query protocol's, which SDKs show).
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("%s: got %v, want the error %s", what, err, code)
	}
}

// errorsAs is errors.As, for a target of an interface type.
func errorsAs(err error, target any) bool { return errors.As(err, target) }
