;;; sync_check.el --- eglot's document sync with multi-byte text, checked against the server  -*- lexical-binding: t; -*-
;; Edits a UTF-8 buffer holding emoji and CJK (inserts, a deletion across an emoji, a
;; replacement after CJK, several edits per didChange), then asks `margin/status' from Emacs
;; (`jsonrpc-request' on the eglot server object): the server's copy must have the buffer's
;; version and the fingerprint of exactly its text, before and after saving.
;; Environment: MARGIN_EMACS_FILE, MARGIN_EMACS_OUT.

(load (expand-file-name "harness.el" (file-name-directory load-file-name)) nil t)
(margin-h-watchdog 240)

(defun sync-check-goto (line column)
  "Point at LINE (1-based) and COLUMN (characters)."
  (goto-char (point-min))
  (forward-line (1- line))
  (forward-char column))

(let (buffer)
  (margin-h-step "open"
    (setq buffer (margin-h-open (getenv "MARGIN_EMACS_FILE")))
    (let ((status (margin-h-status)))
      (margin-h-put 'server_encoding (plist-get status :positionEncoding)))
    (margin-h-record-copy 'opened))
  (margin-h-step "one edit at a time"
    (with-current-buffer buffer
      ;; After an emoji: eglot counts the column in UTF-16 code units (the emoji is two).
      (sync-check-goto 1 3)                       ; "# 😀|✨ ...": after the emoji
      (insert "🎉")
      (margin-h-flush)
      ;; A CJK word replaced: "名前" → "なまえ🙂".
      (goto-char (point-min))
      (search-forward "名前")
      (replace-match "なまえ🙂" t t)
      (margin-h-flush)
      (margin-h-record-copy 'one_at_a_time)))
  (margin-h-step "several edits in one didChange"
    (with-current-buffer buffer
      ;; A deletion across an emoji, an insertion on a CJK line, a new line at the end: the
      ;; changes reach the server together, each at positions of the text before it.
      (goto-char (point-min))
      (search-forward "x😀y")
      (delete-region (- (point) 2) (- (point) 1))  ; "x😀y" → "xy": a surrogate pair deleted
      (goto-char (point-min))
      (search-forward "漢字")
      (insert "と😀𠀋")                          ; 𠀋 is outside the BMP: two UTF-16 units
      (goto-char (point-max))
      (insert "print('終わり 👋')\n")
      (margin-h-flush)
      (margin-h-record-copy 'several)))
  (margin-h-step "save"
    (with-current-buffer buffer
      (save-buffer)
      (margin-h-record-copy 'saved)))
  (margin-h-step "stop"
    (margin-h-put 'stopped (with-current-buffer buffer (margin-h-stop))))
  (margin-h-finish))
