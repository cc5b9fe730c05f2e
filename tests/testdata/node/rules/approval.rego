package turngate.tool_call

# Every remove waits for the chat user's approval (tool approval in useChat).
approval contains "removes a file" if input.tool.name == "remove"
