package client

import (
	"context"

	"github.com/sluicehq/sluice"
)

// MessageSender returns NewSender's sender as a sluice.MessageSender.
func (c *Client) MessageSender(entity string) (sluice.MessageSender, error) {
	s, err := c.NewSender(entity)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// MessageReceiver returns NewReceiver's receiver as a
// sluice.MessageReceiver.
func (c *Client) MessageReceiver(entity string, opts *sluice.ReceiverOptions) (sluice.MessageReceiver, error) {
	r, err := c.NewReceiver(entity, opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// AcceptMessageSession returns AcceptSession's session receiver as a
// sluice.MessageSessionReceiver.
func (c *Client) AcceptMessageSession(ctx context.Context, queue, sessionID string, opts *sluice.ReceiverOptions) (sluice.MessageSessionReceiver, error) {
	s, err := c.AcceptSession(ctx, queue, sessionID, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// AcceptNextMessageSession returns AcceptNextSession's session receiver
// as a sluice.MessageSessionReceiver.
func (c *Client) AcceptNextMessageSession(ctx context.Context, queue string, opts *sluice.ReceiverOptions) (sluice.MessageSessionReceiver, error) {
	s, err := c.AcceptNextSession(ctx, queue, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ResumeMessageSession returns ResumeSession's session receiver as a
// sluice.MessageSessionReceiver.
func (c *Client) ResumeMessageSession(queue, sessionID, lockToken string, opts *sluice.ReceiverOptions) (sluice.MessageSessionReceiver, error) {
	s, err := c.ResumeSession(queue, sessionID, lockToken, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// StreamEventProcessor returns NewStreamProcessor's processor as a
// sluice.StreamEventProcessor.
func (c *Client) StreamEventProcessor(opts *sluice.StreamProcessorOptions) sluice.StreamEventProcessor {
	return c.NewStreamProcessor(opts)
}

// The network client implements the library's shape.
var (
	_ sluice.API                    = (*Client)(nil)
	_ sluice.MessageSender          = (*Sender)(nil)
	_ sluice.MessageReceiver        = (*Receiver)(nil)
	_ sluice.MessageSessionReceiver = (*SessionReceiver)(nil)
	_ sluice.StreamEventProcessor   = (*StreamProcessor)(nil)
)
