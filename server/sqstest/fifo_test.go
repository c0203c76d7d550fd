package sqstest

import (
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// sendFIFO sends a FIFO message and returns its SequenceNumber.
func (e *env) sendFIFO(t *testing.T, url, group, dedup, body string) string {
	t.Helper()
	out, err := e.sqs.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageGroupId: &group,
		MessageDeduplicationId: &dedup})
	if err != nil {
		t.Fatalf("SendMessage(%s/%s): %v", group, body, err)
	}
	if out.SequenceNumber == nil || *out.SequenceNumber == "" {
		t.Fatalf("SendMessage to a FIFO queue gave no SequenceNumber")
	}
	return *out.SequenceNumber
}

// deleteAll deletes received messages.
func (e *env) deleteAll(t *testing.T, url string, ms []types.Message) {
	t.Helper()
	for _, m := range ms {
		if _, err := e.sqs.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatalf("DeleteMessage(%s): %v", *m.Body, err)
		}
	}
}

// TestFIFO checks FIFO queues: order within a group, a group held back
// while any of its messages is in flight and handed back once they are
// deleted, redelivery in order, and deduplication.
func TestFIFO(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		_, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo")})
		wantCode(t, "CreateQueue of a .fifo name without FifoQueue", err, "InvalidParameterValue")
		_, err = e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"), Attributes: map[string]string{"FifoQueue": "true"}})
		wantCode(t, "CreateQueue of a FIFO queue without .fifo", err, "InvalidParameterValue")
		url := e.createQueue(t, "jobs.fifo", map[string]string{"FifoQueue": "true", "VisibilityTimeout": "60"})
		_, err = e.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"FifoQueue": "false"}})
		wantCode(t, "SetQueueAttributes turning FIFO off", err, "InvalidAttributeName")

		for _, bad := range []struct {
			what string
			in   sqs.SendMessageInput
			code string
		}{
			{"no group", sqs.SendMessageInput{MessageBody: aws.String("m"), MessageDeduplicationId: aws.String("d")}, "MissingParameter"},
			{"no deduplication id", sqs.SendMessageInput{MessageBody: aws.String("m"), MessageGroupId: aws.String("g")}, "InvalidParameterValue"},
			{"a delay of its own", sqs.SendMessageInput{MessageBody: aws.String("m"), MessageGroupId: aws.String("g"),
				MessageDeduplicationId: aws.String("d"), DelaySeconds: 5}, "InvalidParameterValue"},
			{"a group with a space", sqs.SendMessageInput{MessageBody: aws.String("m"), MessageGroupId: aws.String("g g"),
				MessageDeduplicationId: aws.String("d")}, "InvalidParameterValue"},
		} {
			in := bad.in
			in.QueueUrl = &url
			_, err := e.sqs.SendMessage(ctx, &in)
			wantCode(t, "SendMessage with "+bad.what, err, bad.code)
		}

		first := e.sendFIFO(t, url, "a", "a1", "a1")
		e.sendFIFO(t, url, "a", "a2", "a2")
		e.sendFIFO(t, url, "b", "b1", "b1")
		e.sendFIFO(t, url, "a", "a3", "a3")
		e.sendFIFO(t, url, "b", "b2", "b2")
		if again := e.sendFIFO(t, url, "a", "a1", "a1 again"); again != first {
			t.Fatalf("a duplicate's SequenceNumber = %s, want the first's %s", again, first)
		}

		// One receive takes one group's messages, in order; the next the
		// other group's; then nothing: both are in flight.
		ra := receive(t, e.sqs, url, 10, 0)
		rb := receive(t, e.sqs, url, 10, 0)
		if bodies(ra)[0] == "b1" {
			ra, rb = rb, ra
		}
		if got := bodies(ra); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
			t.Fatalf("group a received as %v, want [a1 a2 a3]", got)
		}
		if got := bodies(rb); !slices.Equal(got, []string{"b1", "b2"}) {
			t.Fatalf("group b received as %v, want [b1 b2]", got)
		}
		m := ra[0]
		if m.Attributes["MessageGroupId"] != "a" || m.Attributes["MessageDeduplicationId"] != "a1" || m.Attributes["SequenceNumber"] != first {
			t.Fatalf("a1's attributes = %v", m.Attributes)
		}
		receiveNone(t, e.sqs, url)

		// A group stays held while any message of its receive is in
		// flight, and is handed back once all are deleted.
		e.deleteAll(t, url, ra[:2])
		e.sendFIFO(t, url, "a", "a4", "a4")
		receiveNone(t, e.sqs, url)
		e.deleteAll(t, url, ra[2:])
		if got := bodies(receive(t, e.sqs, url, 10, 0)); !slices.Equal(got, []string{"a4"}) {
			t.Fatalf("after group a's messages were deleted a receive got %v, want [a4]", got)
		}

		// Visible again at once, a message comes back before the ones
		// after it in its group.
		e.deleteAll(t, url, rb[1:])
		if _, err := e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: rb[0].ReceiptHandle,
			VisibilityTimeout: 0}); err != nil {
			t.Fatalf("ChangeMessageVisibility(0): %v", err)
		}
		again := receive(t, e.sqs, url, 10, 0)
		if got := bodies(again); !slices.Equal(got, []string{"b1"}) || again[0].Attributes["ApproximateReceiveCount"] != "2" {
			t.Fatalf("after b1 was made visible a receive got %v (%v), want b1 a second time", got, again[0].Attributes)
		}
		// Renewing one message renews its group: still held.
		if _, err := e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: again[0].ReceiptHandle,
			VisibilityTimeout: 600}); err != nil {
			t.Fatalf("ChangeMessageVisibility(600): %v", err)
		}
		e.sendFIFO(t, url, "b", "b3", "b3")
		receiveNone(t, e.sqs, url)
		e.deleteAll(t, url, again)
		if got := bodies(receive(t, e.sqs, url, 10, 0)); !slices.Equal(got, []string{"b3"}) {
			t.Fatalf("a receive got %v, want [b3]", got)
		}

		// Deduplication by content, and within a group.
		curl := e.createQueue(t, "content.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true",
			"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
		for _, g := range []string{"x", "x", "y"} {
			if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &curl, MessageBody: aws.String("same"), MessageGroupId: aws.String(g)}); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for range 2 {
			ms := receive(t, e.sqs, curl, 10, 0)
			for _, m := range ms {
				got = append(got, m.Attributes["MessageGroupId"])
			}
			e.deleteAll(t, curl, ms)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"x", "y"}) {
			t.Fatalf("content deduplicated per group delivered the groups %v, want [x y]", got)
		}
		receiveNone(t, e.sqs, curl)
		attrs, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &curl, AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil || attrs.Attributes["FifoQueue"] != "true" || attrs.Attributes["ContentBasedDeduplication"] != "true" ||
			attrs.Attributes["DeduplicationScope"] != "messageGroup" {
			t.Fatalf("a FIFO queue's attributes: %v, %v", attrs.Attributes, err)
		}
		var qe *types.QueueNameExists
		if _, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("content.fifo"),
			Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false"}}); !errors.As(err, &qe) {
			t.Fatalf("CreateQueue of content.fifo with other attributes = %v, want QueueNameExists", err)
		}
	})
}

// TestReceiveRequestAttemptId checks that a FIFO receive tried again with
// its attempt id gets what the first try locked, and another gets
// nothing while that group is held.
func TestReceiveRequestAttemptId(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		url := e.createQueue(t, "jobs.fifo", map[string]string{"FifoQueue": "true"})
		e.sendFIFO(t, url, "a", "1", "a1")
		e.sendFIFO(t, url, "a", "2", "a2")
		in := &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 10, ReceiveRequestAttemptId: aws.String("try-1")}
		first, err := e.sqs.ReceiveMessage(ctx, in)
		if err != nil || len(first.Messages) != 2 {
			t.Fatalf("ReceiveMessage = %v, %v", first, err)
		}
		again, err := e.sqs.ReceiveMessage(ctx, in)
		if err != nil || len(again.Messages) != 2 || *again.Messages[0].ReceiptHandle != *first.Messages[0].ReceiptHandle {
			t.Fatalf("ReceiveMessage tried again = %v, %v; want the first try's messages and handles", again, err)
		}
		receiveNone(t, e.sqs, url)
		e.deleteAll(t, url, again.Messages)
	})
}
