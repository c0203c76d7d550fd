package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// maxForwardCheck bounds the entities a check of forwarding reads.
const maxForwardCheck = 10000

// checkForward checks where e forwards, as Service Bus does: the target
// must exist and be a queue or a topic, e must not require sessions, and
// the target must not lead back to e (directly, through other entities'
// forwarding, or through a topic's subscriptions).
func (c *Client) checkForward(ctx context.Context, e *entity) error {
	if e.forwardTo == "" {
		return nil
	}
	if e.props.RequiresSession {
		return fmt.Errorf("%s %q requires sessions, and an entity that does cannot forward: %w", e.kind, e.name, ErrInvalidArgument)
	}
	to, err := c.freshEntity(ctx, e.forwardTo)
	if errors.Is(err, ErrEntityNotFound) {
		return fmt.Errorf("forward-to entity %q does not exist: %w: %w", e.forwardTo, ErrInvalidArgument, ErrEntityNotFound)
	}
	if err != nil {
		return err
	}
	if to.kind == kindSubscription {
		return fmt.Errorf("forward-to entity %q is a subscription: forward to its topic or to a queue: %w", e.forwardTo, ErrInvalidArgument)
	}
	loop, err := c.leadsTo(ctx, &to, e)
	if err != nil {
		return err
	}
	if loop {
		return fmt.Errorf("%s %q forwarding to %q makes a loop: %w", e.kind, e.name, e.forwardTo, ErrInvalidArgument)
	}
	return nil
}

// leadsTo reports whether messages arriving at start can reach e again:
// e itself, or for a subscription its topic.
func (c *Client) leadsTo(ctx context.Context, start, e *entity) (bool, error) {
	back := func(name string) bool {
		if strings.EqualFold(name, e.name) {
			return true
		}
		if e.kind != kindSubscription {
			return false
		}
		topic, _, _ := strings.Cut(e.name, "/Subscriptions/")
		return strings.EqualFold(name, topic)
	}
	seen := map[string]bool{}
	next := []entity{*start}
	for len(next) > 0 && len(seen) < maxForwardCheck {
		n := next[0]
		next = next[1:]
		if back(n.name) {
			return true, nil
		}
		if seen[n.name] {
			continue
		}
		seen[n.name] = true
		var targets []string
		switch {
		case n.kind == kindTopic:
			subs, err := c.subscriptions(ctx, n.name)
			if err != nil {
				return false, err
			}
			for _, s := range subs {
				if back(s.name) {
					return true, nil
				}
				if s.forwardTo != "" {
					targets = append(targets, s.forwardTo)
				}
			}
		case n.forwardTo != "":
			targets = append(targets, n.forwardTo)
		}
		for _, t := range targets {
			if back(t) {
				return true, nil
			}
			to, err := c.freshEntity(ctx, t)
			if errors.Is(err, ErrEntityNotFound) {
				continue
			}
			if err != nil {
				return false, err
			}
			next = append(next, to)
		}
	}
	return false, nil
}

// freshEntity reads an entity of any kind from storage, not the cache.
func (c *Client) freshEntity(ctx context.Context, name string) (entity, error) {
	s, err := c.st.GetQueue(ctx, canonical(name))
	if err != nil {
		return entity{}, err
	}
	return decodeEntity(s)
}
