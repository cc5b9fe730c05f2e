package turngate.tool_call

# Pitfall: strings and numbers from JSON. A client may send a body field as
# 5 or as "5". Rego never converts: "5" == 5 is false, and comparing
# across types orders every string after every number, so "2" > 10 is
# true. Accept the types you expect explicitly, and refuse the rest.

# email_recipients is body.maxRecipients as a number, whether it came as a
# number or as a string of digits; undefined otherwise.
email_recipients := n if {
	n := input.body.maxRecipients
	is_number(n)
}

email_recipients := to_number(n) if {
	n := input.body.maxRecipients
	is_string(n)
	regex.match(`^[0-9]{1,6}$`, n)
}

block contains "bulk_email: at most 10 recipients" if {
	input.tool.name == "bulk_email"
	email_recipients > 10
}

block contains "bulk_email: maxRecipients must be a number" if {
	input.tool.name == "bulk_email"
	not email_recipients
}
