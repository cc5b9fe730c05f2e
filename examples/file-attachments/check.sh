#!/usr/bin/env bash
# Shows an image reaching the model, a PDF refused by a rule and a zip
# refused by the agent's allowed media types.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

PNG="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
PDF="data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK"
ZIP="data:application/zip;base64,UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA=="
# message ID TEXT MEDIATYPE URL FILENAME is a user message with one file part.
message() {
	echo "{\"id\":\"$1-$RUN\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"$2\"},{\"type\":\"file\",\"mediaType\":\"$3\",\"url\":\"$4\",\"filename\":\"$5\"}]}"
}

S=img-$RUN
send_chat image vision "{\"id\":\"$S\",\"trigger\":\"submit-message\",\"messages\":[$(message u1 'What is in this picture?' image/png "$PNG" dot.png)]}"
expect "the image turn is answered" data/image.txt 'I see your picture'
get image-history "/v1/agents/vision/sessions/$S/messages" >/dev/null
expect "the history returns the file part as sent" data/image-history.json '"type":"file","mediaType":"image/png","url":"data:image/png;base64,iVBORw0KGgo[^"]*","filename":"dot.png"'

S=pdf-$RUN
send_chat pdf vision "{\"id\":\"$S\",\"trigger\":\"submit-message\",\"messages\":[$(message u2 'Summarise this document.' application/pdf "$PDF" report.pdf)]}"
expect "the PDF turn is refused with the rule's reason" data/pdf.sse '"type":"error","errorText":"PDF files are not accepted here; paste the relevant text instead."'
expect_no "the model never answered it" data/pdf.sse '"type":"text-delta"'
audit pdf "$S"
expect "the audit log names the rule" data/pdf.audit '"rulesFired":\["attachments.yaml#no-pdf"\]'

post zip /v1/agents/vision/chat "{\"id\":\"zip-$RUN\",\"messages\":[$(message u3 'Unpack this.' application/zip "$ZIP" a.zip)]}"
expect "a zip is refused at the door, naming the part" data/zip.out '"code":"invalid_attachment".*"pointer":"/messages/0/parts/1"'
cat data/zip.out; echo
finish
