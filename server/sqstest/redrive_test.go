package sqstest

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// deadLetter receives a message until its redrive policy moves it: each
// receive made visible again at once.
func (e *env) deadLetter(t *testing.T, url string, receives int) {
	t.Helper()
	for i := range receives {
		ms := receive(t, e.sqs, url, 1, 0)
		if len(ms) != 1 {
			t.Fatalf("receive %d found nothing", i+1)
		}
		if _, err := e.sqs.ChangeMessageVisibility(t.Context(), &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: ms[0].ReceiptHandle}); err != nil {
			t.Fatalf("ChangeMessageVisibility(0): %v", err)
		}
	}
}

// waitMove waits for the queue's newest move task to complete and
// returns how many it moved.
func (e *env) waitMove(t *testing.T, dlqARN string) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := e.sqs.ListMessageMoveTasks(t.Context(), &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqARN)})
		if err != nil || len(list.Results) == 0 {
			t.Fatalf("ListMessageMoveTasks = %v, %v", list, err)
		}
		r := list.Results[0]
		if *r.Status == "COMPLETED" {
			return r.ApproximateNumberOfMessagesMoved
		}
		if *r.Status != "RUNNING" || time.Now().After(deadline) {
			t.Fatalf("the move task is %s (%s)", *r.Status, aws.ToString(r.FailureReason))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedrive checks RedrivePolicy: a message received maxReceiveCount
// times moves to the dead-letter queue, where it is received, counted and
// deleted as that queue's, and StartMessageMoveTask moves it back.
func TestRedrive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		dlq := e.createQueue(t, "orders-dlq", nil)
		dlqARN := "arn:aws:sqs:eu-west-1:000000000000:orders-dlq"
		for _, bad := range []string{
			`{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:000000000000:missing","maxReceiveCount":2}`,
			`{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:000000000000:orders-1","maxReceiveCount":2}`,
			`{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":1001}`,
			`{"deadLetterTargetArn":"not an arn","maxReceiveCount":2}`,
			`not json`,
		} {
			_, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders-1"), Attributes: map[string]string{"RedrivePolicy": bad}})
			var ae interface{ ErrorCode() string }
			if err == nil || !errorsAs(err, &ae) || ae.ErrorCode() != "InvalidAttributeValue" && ae.ErrorCode() != "InvalidParameterValue" {
				t.Fatalf("CreateQueue with RedrivePolicy %s = %v, want InvalidAttributeValue", bad, err)
			}
		}
		policy := `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":"2"}`
		url := e.createQueue(t, "orders-1", map[string]string{"RedrivePolicy": policy})
		got, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"RedrivePolicy"}})
		if want := `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":2}`; err != nil || got.Attributes["RedrivePolicy"] != want {
			t.Fatalf("RedrivePolicy = %q, %v; want %s", got.Attributes["RedrivePolicy"], err, want)
		}
		_, err = e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"),
			Attributes: map[string]string{"FifoQueue": "true", "RedrivePolicy": policy}})
		wantCode(t, "a FIFO queue dead-lettering into a standard one", err, "InvalidAttributeValue")

		srcs, err := e.sqs.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq})
		if err != nil || !slices.Equal(srcs.QueueUrls, []string{url}) {
			t.Fatalf("ListDeadLetterSourceQueues = %v, %v; want [%s]", srcs, err, url)
		}

		if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("poison")}); err != nil {
			t.Fatal(err)
		}
		e.deadLetter(t, url, 2)
		receiveNone(t, e.sqs, url)
		counts, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlq,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil || counts.Attributes["ApproximateNumberOfMessages"] != "1" {
			t.Fatalf("the dead-letter queue counts %v, %v; want 1", counts.Attributes, err)
		}
		ms := receive(t, e.sqs, dlq, 10, 0)
		if len(ms) != 1 || *ms[0].Body != "poison" || ms[0].Attributes["DeadLetterQueueSourceArn"] != "arn:aws:sqs:eu-west-1:000000000000:orders-1" {
			t.Fatalf("the dead-letter queue gave %+v", ms)
		}
		// In flight in the dead-letter queue, it is not moved.
		if _, err := e.sqs.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqARN)}); err != nil {
			t.Fatalf("StartMessageMoveTask: %v", err)
		}
		if n := e.waitMove(t, dlqARN); n != 0 {
			t.Fatalf("a move task moved %d dead letters in flight", n)
		}
		// Nor may the policy name another queue while it holds it.
		other := e.createQueue(t, "orders-dlq2", nil)
		_, err = e.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{
			"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:000000000000:orders-dlq2","maxReceiveCount":2}`}})
		wantCode(t, "changing the RedrivePolicy's target while it holds dead letters", err, "InvalidAttributeValue")
		if _, err := e.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &other}); err != nil {
			t.Fatal(err)
		}
		// Made visible again in the dead-letter queue, then moved back.
		if _, err := e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &dlq, ReceiptHandle: ms[0].ReceiptHandle}); err != nil {
			t.Fatalf("ChangeMessageVisibility(0) in the dead-letter queue: %v", err)
		}
		_, err = e.sqs.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &url})
		wantCode(t, "StartMessageMoveTask of a queue that is no dead-letter queue", err, "InvalidParameterValue")
		task, err := e.sqs.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqARN),
			MaxNumberOfMessagesPerSecond: aws.Int32(10)})
		if err != nil || task.TaskHandle == nil {
			t.Fatalf("StartMessageMoveTask = %v, %v", task, err)
		}
		if n := e.waitMove(t, dlqARN); n != 1 {
			t.Fatalf("the task moved %d messages, want 1", n)
		}
		back := receive(t, e.sqs, url, 10, 0)
		if len(back) != 1 || *back[0].Body != "poison" {
			t.Fatalf("after the move the source gave %v", bodies(back))
		}

		// Deleted in the dead-letter queue, a dead letter is gone.
		if _, err := e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: back[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		e.deadLetter(t, url, 1) // its second receive since the move moves it again
		if ms = receive(t, e.sqs, dlq, 10, 0); len(ms) != 1 {
			t.Fatalf("the dead-letter queue gave %d messages, want 1", len(ms))
		}
		if _, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &dlq, ReceiptHandle: ms[0].ReceiptHandle}); err != nil {
			t.Fatalf("DeleteMessage in the dead-letter queue: %v", err)
		}
		if st, err := e.lib.GetQueueStats(ctx, "orders-1"); err != nil || st.DeadLettered != 0 || st.Active+st.InFlight != 0 {
			t.Fatalf("after the dead letter was deleted: %+v, %v", st, err)
		}
		// A handle naming a queue that is not a source is refused.
		_, err = e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: ms[0].ReceiptHandle})
		wantCode(t, "a dead letter's handle on a queue that is not its dead-letter queue", err, "ReceiptHandleIsInvalid")

		// PurgeQueue of the dead-letter queue purges its sources' dead
		// letters.
		if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("poison 2")}); err != nil {
			t.Fatal(err)
		}
		e.deadLetter(t, url, 2)
		if _, err := e.sqs.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &dlq}); err != nil {
			t.Fatalf("PurgeQueue of the dead-letter queue: %v", err)
		}
		if st, err := e.lib.GetQueueStats(ctx, "orders-1"); err != nil || st.DeadLettered != 0 {
			t.Fatalf("after PurgeQueue of the dead-letter queue its source holds %+v, %v", st, err)
		}

		// A key may not name a dead-letter queue it may not send to.
		_, err = e.client("manager", managerSecret).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("mine-a"),
			Attributes: map[string]string{"RedrivePolicy": policy}})
		wantCode(t, "a RedrivePolicy naming a queue the key has no grant on", err, "AccessDenied")

		if _, err := e.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"RedrivePolicy": ""}}); err != nil {
			t.Fatalf("removing the RedrivePolicy: %v", err)
		}
		srcs, err = e.sqs.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq})
		if err != nil || len(srcs.QueueUrls) != 0 {
			t.Fatalf("ListDeadLetterSourceQueues after the policy was removed = %v, %v", srcs.QueueUrls, err)
		}
	})
}
