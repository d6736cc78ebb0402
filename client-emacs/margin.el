;;; margin.el --- Margin's chat, explain and edit-ops from Emacs, over eglot  -*- lexical-binding: t; -*-

;; Margin's own requests (margin/chat, margin/explain, margin/editOps, margin/applyOps,
;; margin/status) as small commands, sent to the buffer's eglot server.  Needs eglot (1.9 or
;; later) managing the buffer with margin-lsp; see Margin's docs/editors.md, "Emacs (eglot)".
;;
;;   (require 'margin)
;;   (margin-eglot-setup)                    ; margin-lsp in `eglot-server-programs'
;;   (add-hook 'python-mode-hook #'eglot-ensure)
;;
;;   M-x margin-chat     ask about the buffer (the region, if active); the reply goes to *margin*
;;   M-x margin-explain  what a chat message would send, section by section (no model call)
;;   M-x margin-edit     ask for an edit of the buffer (the region, if active); see the
;;                       proposal in *margin-edit*, then M-x margin-apply
;;   M-x margin-apply    apply the last proposal: only to the text the model saw, rebased
;;                       exactly when your edits since are clear of it, else refused
;;   M-x margin-status   the server's version, position encoding and chat profile

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)

(defgroup margin nil
  "Margin, the AI language server, over eglot."
  :group 'eglot)

(defcustom margin-request-timeout 300
  "Seconds to wait for an answer to Margin's chat and edit requests.
Emacs waits for the answer (\\[keyboard-quit] stops waiting), so keep it above your model's time."
  :type 'number)

(defcustom margin-server-program '("margin-lsp")
  "How eglot starts Margin: a contact as in `eglot-server-programs', the program and its
arguments, then `:initializationOptions' and a plist of settings if you set any there."
  :type '(repeat sexp))

(defcustom margin-major-modes '(python-mode python-ts-mode)
  "The major modes `margin-eglot-setup' has eglot manage with Margin."
  :type '(repeat symbol))

;;;###autoload
(defun margin-eglot-setup ()
  "Have eglot start Margin (`margin-server-program') for `margin-major-modes': their entry,
first in `eglot-server-programs'.  eglot runs one server per major mode, so in those modes Margin
takes the place of your usual server.  Returns the entry."
  (interactive)
  (let ((entry (cons margin-major-modes margin-server-program)))
    (add-to-list 'eglot-server-programs entry)
    entry))

(defvar margin--proposal nil
  "The last proposal of `margin-edit': (BUFFER PARAMS RESULT).")

(defun margin--server ()
  (or (eglot-current-server)
      (user-error "Margin: this buffer is not managed by eglot with margin-lsp")))

(defun margin-request (method &optional params)
  "Send METHOD (a keyword, e.g. :margin/status) with PARAMS to this buffer's server and return
the result (a plist), after sending the buffer's latest edits, so the server sees the text
you see."
  (let ((server (margin--server)))
    (when (bound-and-true-p eglot--managed-mode)
      (eglot--signal-textDocument/didChange))
    (jsonrpc-request server method (or params eglot--{}) :timeout margin-request-timeout)))

(defun margin--where ()
  "The request's place: this file, and the region or the cursor."
  (append (list :textDocument (eglot--TextDocumentIdentifier))
          (if (use-region-p)
              (list :selection (list :start (eglot--pos-to-lsp-position (region-beginning))
                                     :end (eglot--pos-to-lsp-position (region-end))))
            (list :position (eglot--pos-to-lsp-position (point))))))

(defun margin--show (buffer-name text)
  (with-current-buffer (get-buffer-create buffer-name)
    (let ((inhibit-read-only t))
      (goto-char (point-max))
      (insert text))
    (special-mode)
    (goto-char (point-max)))
  (display-buffer buffer-name))

(defun margin-chat (message)
  "Ask Margin MESSAGE about this buffer (and the other open files); the reply goes to *margin*.
Returns the result of margin/chat."
  (interactive "sMargin chat: ")
  (let ((result (margin-request :margin/chat (append (list :message message) (margin--where)))))
    (margin--show "*margin*" (format "> %s\n\n%s\n\n" message
                                     (or (plist-get result :reply) (plist-get result :message) "")))
    result))

(defun margin-explain (message)
  "Show what a chat MESSAGE would send to the model, section by section, without sending it.
Returns the result of margin/explain."
  (interactive "sMargin explain: ")
  (let* ((result (margin-request :margin/explain (append (list :message message) (margin--where))))
         (budget (plist-get result :budget)))
    (margin--show "*margin-explain*"
                  (concat (format "%s / %s tokens (%s)\n"
                                  (plist-get budget :total) (plist-get budget :limit)
                                  (plist-get (plist-get budget :tokenizer) :name))
                          (mapconcat (lambda (section)
                                       (format "  %-14s %6s\n" (plist-get section :name)
                                               (plist-get section :tokens)))
                                     (plist-get budget :sections) "")
                          "\n"))
    result))

(defun margin-edit (instruction)
  "Ask Margin for an edit of this buffer (of the region, if active) following INSTRUCTION.
The proposal is shown in *margin-edit*; `margin-apply' applies it.  Returns the result of
margin/editOps."
  (interactive "sMargin edit: ")
  (let* ((params (append (list :message instruction) (margin--where)))
         (result (margin-request :margin/editOps params))
         (ops (plist-get result :ops)))
    (setq margin--proposal (and (> (length ops) 0) (list (current-buffer) params result)))
    (margin--show "*margin-edit*"
                  (concat (format "> %s\n\n%s\n" instruction (or (plist-get result :assistantMessage) ""))
                          (mapconcat (lambda (op)
                                       (format "\n%s %s%s\n%s" (plist-get op :op) (plist-get op :target)
                                               (if (plist-get op :match)
                                                   (format " %S" (plist-get op :match)) "")
                                               (or (plist-get op :content) "")))
                                     ops "")
                          (if (> (length ops) 0) "\nM-x margin-apply applies it.\n\n" "\n")))
    result))

(defun margin-apply ()
  "Apply the last proposal of `margin-edit' (margin/applyOps).  Returns its result."
  (interactive)
  (unless margin--proposal (user-error "Margin: no proposal to apply"))
  (cl-destructuring-bind (buffer params result) margin--proposal
    (with-current-buffer buffer
      (let ((outcome (margin-request
                      :margin/applyOps
                      (append (list :ops (plist-get result :ops)
                                    :baseFingerprints (plist-get result :baseFingerprints))
                              (cl-loop for key in '(:textDocument :selection :position)
                                       when (plist-member params key)
                                       append (list key (plist-get params key)))))))
        (if (eq (plist-get outcome :applied) t)
            (progn (setq margin--proposal nil)
                   (message "Margin: applied%s" (if (eq (plist-get outcome :rebased) t) " (rebased)" "")))
          (message "Margin: not applied: %s%s"
                   (or (plist-get outcome :failureReason) "")
                   (let ((stale (plist-get outcome :staleFiles)))
                     (if (> (length stale) 0)
                         (format " (changed since: %s)"
                                 (mapconcat #'eglot--uri-to-path stale ", "))
                       ""))))
        outcome))))

(defun margin-status ()
  "Show Margin's version, position encoding and chat profile.  Returns margin/status."
  (interactive)
  (let* ((status (margin-request :margin/status))
         (chat (plist-get (plist-get status :profiles) :chat)))
    (message "Margin %s, %s positions; chat: %s at %s (%s)"
             (plist-get status :version) (plist-get status :positionEncoding)
             (or (plist-get chat :model) "the server's model") (plist-get chat :baseUrl)
             (if (eq (plist-get chat :reachable) t) "reachable" "not reachable"))
    status))

(provide 'margin)
;;; margin.el ends here
