"""The one SSE reader: whole events out of any chunking, and one token rule for plain and chat streams."""

from __future__ import annotations

from schedulers.shared.sse import SSEStream


def test_stream_tokens_are_counted_across_chunks_without_the_closing_events():
    events = b"".join(b'data: {"choices": [{"text": "t", "finish_reason": null}]}\n\n' for _ in range(3))
    events += b'data: {"choices": [{"text": "", "finish_reason": "length"}]}\n\ndata: [DONE]\n\n'
    stream = SSEStream()
    seen = [e for i in range(0, len(events), 7) for e in stream.feed(events[i:i + 7])]
    assert stream.tokens == 3 and b"".join(e.raw for e in seen) == events  # split mid-event, passed on whole
    assert seen[-1].done and not seen[-2].token
    chat = SSEStream()
    chat.feed(b'data: {"choices": [{"delta": {"role": "assistant"}, "finish_reason": null}]}\n\n'
              b'data: {"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]}\n\n')
    assert chat.tokens == 1
    usage = SSEStream()
    (event,) = usage.feed(b'data: {"choices": [], "usage": {"completion_tokens": 7, "prompt_tokens": 3}}\n\n')
    assert event.usage_only and usage.tokens == 7  # the engine's count wins over counted events


def test_a_token_whose_text_is_still_empty_counts():
    """A byte of a longer character streams as an event with empty text and no finish reason."""
    stream = SSEStream()
    stream.feed(b'data: {"choices": [{"text": "", "finish_reason": null}]}\r\n\r\n'
                b'data: {"choices": [{"text": "\\u00e9", "finish_reason": null}]}\r\n\r\n')
    assert stream.tokens == 2
