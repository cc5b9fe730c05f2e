package turngate.tool_result

# Whatever kind of tool produced it, an output mentioning "classified" is
# hidden from the model.
redact contains "" if contains(json.marshal(input.output), "classified")
