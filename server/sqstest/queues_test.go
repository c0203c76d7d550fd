package sqstest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/libtest"
	"github.com/sluicehq/sluice/server"
)

// TestQueues covers the queue operations: create (and its idempotence),
// URL, list with paging, attributes, delete; and their refusals.
func TestQueues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		attrs := map[string]string{"VisibilityTimeout": "600", "MessageRetentionPeriod": "3600", "DelaySeconds": "2",
			"ReceiveMessageWaitTimeSeconds": "5", "MaximumMessageSize": "2048"}
		url := e.createQueue(t, "orders-eu", attrs)
		if want := "http://" + e.addr + "/000000000000/orders-eu"; url != want {
			t.Fatalf("QueueUrl = %q, want %q", url, want)
		}
		// The same attributes again, or some of them, or none: the same
		// queue, as SQS answers.
		for _, a := range []map[string]string{attrs, {"DelaySeconds": "2"}, nil} {
			if again := e.createQueue(t, "orders-eu", a); again != url {
				t.Fatalf("CreateQueue(%v) again = %q, want %q", a, again, url)
			}
		}
		_, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders-eu"), Attributes: map[string]string{"DelaySeconds": "3"}})
		var exists *types.QueueNameExists
		if !errors.As(err, &exists) {
			t.Fatalf("CreateQueue with other attributes = %v, want QueueNameExists", err)
		}
		wantCode(t, "CreateQueue with other attributes", err, "QueueAlreadyExists")

		got, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err != nil {
			t.Fatalf("GetQueueAttributes: %v", err)
		}
		for k, v := range attrs {
			if got.Attributes[k] != v {
				t.Errorf("attribute %s = %q, want %q", k, got.Attributes[k], v)
			}
		}
		if arn := got.Attributes["QueueArn"]; arn != "arn:aws:sqs:eu-west-1:000000000000:orders-eu" {
			t.Errorf("QueueArn = %q", arn)
		}
		for _, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
			if got.Attributes[a] != "0" {
				t.Errorf("%s of an empty queue = %q, want 0", a, got.Attributes[a])
			}
		}
		if got.Attributes["CreatedTimestamp"] == "" || got.Attributes["LastModifiedTimestamp"] == "" {
			t.Errorf("timestamps missing: %v", got.Attributes)
		}
		// The queue's lock, for sluice's own receivers, is as close to the
		// visibility timeout as sluice allows.
		if info, err := e.lib.GetQueue(ctx, "orders-eu"); err != nil || info.LockDuration != sluice.MaxLockDuration ||
			info.DefaultTTL != time.Hour {
			t.Fatalf("the queue in sluice: %+v, %v", info, err)
		}

		if _, err := e.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url,
			Attributes: map[string]string{"VisibilityTimeout": "45", "DelaySeconds": "0"}}); err != nil {
			t.Fatalf("SetQueueAttributes: %v", err)
		}
		got, err = e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
			AttributeNames: []types.QueueAttributeName{"VisibilityTimeout", "DelaySeconds", "ReceiveMessageWaitTimeSeconds"}})
		if want := map[string]string{"VisibilityTimeout": "45", "DelaySeconds": "0", "ReceiveMessageWaitTimeSeconds": "5"}; err != nil ||
			!maps.Equal(got.Attributes, want) {
			t.Fatalf("attributes after SetQueueAttributes = %v, %v; want %v", got.Attributes, err, want)
		}

		for _, bad := range []struct {
			attrs map[string]string
			code  string
		}{
			{map[string]string{"VisibilityTimeout": "43201"}, "InvalidAttributeValue"},
			{map[string]string{"DelaySeconds": "-1"}, "InvalidAttributeValue"},
			{map[string]string{"MessageRetentionPeriod": "59"}, "InvalidAttributeValue"},
			{map[string]string{"ReceiveMessageWaitTimeSeconds": "21"}, "InvalidAttributeValue"},
			{map[string]string{"MaximumMessageSize": "1023"}, "InvalidAttributeValue"},
			{map[string]string{"VisibilityTimeout": "ten"}, "InvalidAttributeValue"},
			{map[string]string{"Colour": "blue"}, "InvalidAttributeName"},
			{map[string]string{"Policy": "{}"}, "InvalidAttributeName"},
		} {
			_, err := e.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: bad.attrs})
			wantCode(t, fmt.Sprintf("SetQueueAttributes(%v)", bad.attrs), err, bad.code)
			_, err = e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bad-attrs"), Attributes: bad.attrs})
			wantCode(t, fmt.Sprintf("CreateQueue(%v)", bad.attrs), err, bad.code)
		}
		for _, name := range []string{"", "has space", "dots.not.allowed", strings.Repeat("n", 81)} {
			_, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
			wantCode(t, fmt.Sprintf("CreateQueue(%q)", name), err, "InvalidParameterValue")
		}

		if u, err := e.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders-eu")}); err != nil || *u.QueueUrl != url {
			t.Fatalf("GetQueueUrl = %v, %v", u, err)
		}
		_, err = e.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
		var missing *types.QueueDoesNotExist
		if !errors.As(err, &missing) {
			t.Fatalf("GetQueueUrl of a missing queue = %v, want QueueDoesNotExist", err)
		}
		wantCode(t, "GetQueueUrl of a missing queue", err, "AWS.SimpleQueueService.NonExistentQueue")

		for _, n := range []string{"orders-us", "orders-ap", "billing"} {
			e.createQueue(t, n, nil)
		}
		var listed []string
		in := &sqs.ListQueuesInput{QueueNamePrefix: aws.String("orders-"), MaxResults: aws.Int32(2)}
		for {
			page, err := e.sqs.ListQueues(ctx, in)
			if err != nil {
				t.Fatalf("ListQueues: %v", err)
			}
			listed = append(listed, page.QueueUrls...)
			if page.NextToken == nil {
				break
			}
			in.NextToken = page.NextToken
		}
		want := []string{"orders-ap", "orders-eu", "orders-us"}
		for i := range want {
			want[i] = "http://" + e.addr + "/000000000000/" + want[i]
		}
		if !slices.Equal(listed, want) {
			t.Fatalf("ListQueues(orders-, 2 a page) = %v, want %v", listed, want)
		}
		all, err := e.sqs.ListQueues(ctx, &sqs.ListQueuesInput{})
		if err != nil || len(all.QueueUrls) != 4 || all.NextToken != nil {
			t.Fatalf("ListQueues() = %v, %v; want 4 queues", all, err)
		}

		if _, err := e.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url}); err != nil {
			t.Fatalf("DeleteQueue: %v", err)
		}
		_, err = e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url})
		if !errors.As(err, &missing) {
			t.Fatalf("GetQueueAttributes of a deleted queue = %v, want QueueDoesNotExist", err)
		}
		_, err = e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")})
		if !errors.As(err, &missing) {
			t.Fatalf("SendMessage to a deleted queue = %v, want QueueDoesNotExist", err)
		}
		_, err = e.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url})
		if !errors.As(err, &missing) {
			t.Fatalf("DeleteQueue of a deleted queue = %v, want QueueDoesNotExist", err)
		}
	})
}

// TestNotServed checks that what the endpoint does not serve is refused
// clearly rather than half done.
func TestNotServed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		_, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"),
			Attributes: map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"allowAll"}`}})
		wantCode(t, "CreateQueue with a redrive allow policy", err, "AWS.SimpleQueueService.UnsupportedOperation")
		url := e.createQueue(t, "jobs", nil)
		_, err = e.sqs.AddPermission(ctx, &sqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("l"), AWSAccountIds: []string{"1"},
			Actions: []string{"SendMessage"}})
		wantCode(t, "AddPermission", err, "InvalidAction")
		// A topic's name is taken.
		if _, err := e.lib.CreateTopic(ctx, "events", nil); err != nil {
			t.Fatal(err)
		}
		_, err = e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("events")})
		wantCode(t, "CreateQueue of a topic's name", err, "QueueAlreadyExists")
	})
}

// TestTags checks queue tags: given at creation, added, listed, removed.
func TestTags(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		out, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("tagged"), Tags: map[string]string{"team": "billing"}})
		if err != nil {
			t.Fatal(err)
		}
		url := out.QueueUrl
		if _, err := e.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: url, Tags: map[string]string{"env": "prod", "team": "payments"}}); err != nil {
			t.Fatalf("TagQueue: %v", err)
		}
		if _, err := e.sqs.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: url, TagKeys: []string{"env"}}); err != nil {
			t.Fatalf("UntagQueue: %v", err)
		}
		tags, err := e.sqs.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url})
		if want := map[string]string{"team": "payments"}; err != nil || !maps.Equal(tags.Tags, want) {
			t.Fatalf("ListQueueTags = %v, %v; want %v", tags.Tags, err, want)
		}
		_, err = e.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: url, Tags: map[string]string{"k": strings.Repeat("v", 257)}})
		wantCode(t, "TagQueue with a value of 257 characters", err, "InvalidParameterValue")
		many := map[string]string{}
		for i := range 20 {
			many[fmt.Sprintf("key-%02d", i)] = strings.Repeat("v", 60)
		}
		_, err = e.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: url, Tags: many})
		wantCode(t, "TagQueue past what sluice keeps with a queue", err, "InvalidParameterValue")
		if tags, err := e.sqs.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url}); err != nil || len(tags.Tags) != 1 {
			t.Fatalf("a refused TagQueue changed the tags: %v, %v", tags.Tags, err)
		}
	})
}

// TestAuthorization checks signatures and grants: a wrong secret, an
// unknown key, a key used beyond its grants, and listings that show a
// key only its queues.
func TestAuthorization(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		url := e.createQueue(t, "orders-1", nil)
		e.createQueue(t, "billing", nil)

		_, err := e.client("admin", "not-the-secret").ListQueues(ctx, &sqs.ListQueuesInput{})
		wantCode(t, "a request signed with a wrong secret", err, "SignatureDoesNotMatch")
		_, err = e.client("nobody", adminSecret).ListQueues(ctx, &sqs.ListQueuesInput{})
		wantCode(t, "a request of an unknown key", err, "InvalidClientTokenId")

		sender, receiver := e.client("sender", senderSecret), e.client("receiver", receiverSecret)
		if _, err := sender.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")}); err != nil {
			t.Fatalf("SendMessage with a send grant: %v", err)
		}
		_, err = sender.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})
		wantCode(t, "ReceiveMessage with a send grant only", err, "AccessDenied")
		_, err = sender.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url})
		wantCode(t, "PurgeQueue with a send grant only", err, "AccessDenied")
		_, err = sender.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders-2")})
		wantCode(t, "CreateQueue with a send grant only", err, "AccessDenied")
		billing := "http://" + e.addr + "/000000000000/billing"
		_, err = sender.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &billing, MessageBody: aws.String("m")})
		wantCode(t, "SendMessage to a queue the key has no grant on", err, "AccessDenied")
		out, err := receiver.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("ReceiveMessage with a receive grant = %v, %v", out, err)
		}
		if _, err := receiver.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
			t.Fatalf("DeleteMessage with a receive grant: %v", err)
		}
		listed, err := receiver.ListQueues(ctx, &sqs.ListQueuesInput{})
		if err != nil || !slices.Equal(listed.QueueUrls, []string{url}) {
			t.Fatalf("ListQueues of a key granted orders-* = %v, %v; want [%s]", listed.QueueUrls, err, url)
		}
	})
}

// TestNoKeys checks that a server without keys serves unsigned requests
// of any credentials, on loopback only.
func TestNoKeys(t *testing.T) {
	libtest.ForEachBackend(t, func(t *testing.T, c *sluice.Client) {
		e := start(t, c, server.Config{})
		anyone := e.client("whoever", "whatever")
		url := e.createQueue(t, "open", nil)
		if _, err := anyone.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")}); err != nil {
			t.Fatalf("SendMessage without keys: %v", err)
		}
	})
	if _, err := server.New(server.Config{Client: &sluice.Client{}, SQSAddr: "0.0.0.0:0"}); err == nil {
		t.Fatal("server.New with an SQS endpoint on every interface and no keys: no error")
	}
}
