"""The brakes inside the Python agent frameworks people use, one module per framework.

Each module puts :class:`dsh_loop_brake.Brakes` (the loop brake and, optionally, the circuit
breaker) into its framework's own public extension point for a tool call about to run, and
imports that framework only when the module itself is imported:

* ``adapters.langchain``        — ``LoopBrakeMiddleware`` (LangChain v1 ``AgentMiddleware``)
* ``adapters.openai_agents``    — ``loop_brake_guardrail``, ``brake_agent`` (tool input guardrail)
* ``adapters.pydantic_ai``      — ``loop_brake_capability`` (an ``Agent`` capability)
* ``adapters.claude_agent_sdk`` — ``loop_brake_hooks`` (``PreToolUse`` hook matchers)
* ``adapters.llm``              — ``loop_brake_before_call`` (``chain(..., before_call=...)``)
* ``adapters.google_adk``       — ``LoopBrakePlugin`` (a ``Runner`` plugin)

A module whose framework is not installed raises an ``ImportError`` that names the extra to
install, e.g. ``pip install "dsh-loop-brake[langchain]"``. This package itself imports nothing.
"""
