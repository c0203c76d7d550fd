package sqs

import (
	"context"
	"maps"
)

// Tags are kept with a queue's other SQS settings, in its UserMetadata,
// whose 1,024 bytes bound them.

type tagQueueInput struct {
	QueueUrl string
	Tags     map[string]string
}

type untagQueueInput struct {
	QueueUrl string
	TagKeys  []string
}

type listTagsOutput struct {
	Tags map[string]string `json:",omitempty"`
}

func (h *Handler) listQueueTags(ctx context.Context, rq *request, body []byte) (any, error) {
	var in queueURLInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, 0)
	if err != nil {
		return nil, err
	}
	return listTagsOutput{Tags: q.sqs.Tags}, nil
}

func (h *Handler) tagQueue(ctx context.Context, rq *request, body []byte) (any, error) {
	var in tagQueueInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if len(in.Tags) == 0 {
		return nil, missingParameter("Tags")
	}
	return h.changeTags(ctx, rq, in.QueueUrl, func(tags map[string]string) { maps.Copy(tags, in.Tags) })
}

func (h *Handler) untagQueue(ctx context.Context, rq *request, body []byte) (any, error) {
	var in untagQueueInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if len(in.TagKeys) == 0 {
		return nil, missingParameter("TagKeys")
	}
	return h.changeTags(ctx, rq, in.QueueUrl, func(tags map[string]string) {
		for _, k := range in.TagKeys {
			delete(tags, k)
		}
	})
}

// changeTags changes a queue's tags, as SetQueueAttributes changes its
// attributes.
func (h *Handler) changeTags(ctx context.Context, rq *request, queueURL string, change func(map[string]string)) (any, error) {
	err := h.update(ctx, rq, queueURL, func(q *queue) error {
		tags := maps.Clone(q.sqs.Tags)
		if tags == nil {
			tags = map[string]string{}
		}
		change(tags)
		if err := checkTags(tags); err != nil {
			return err
		}
		q.sqs.Tags = tags
		if len(tags) == 0 {
			q.sqs.Tags = nil
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return empty{}, nil
}

// checkTags checks tags as SQS does: at most 50, keys of 1 to 128
// characters, values of at most 256.
func checkTags(tags map[string]string) error {
	if len(tags) > maxTags {
		return invalidParameter("a queue has at most %d tags: %d given", maxTags, len(tags))
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 || len(v) > 256 || !validBody(k) || !validBody(v) {
			return invalidParameter("tag %q: a key is 1 to 128 characters and a value at most 256", truncate(k, 100))
		}
	}
	return nil
}
