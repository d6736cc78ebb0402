;;; margin.el --- Margin's chat, explain, edit-ops and agent from Emacs, over eglot  -*- lexical-binding: t; -*-

;; Margin's own requests (margin/chat, margin/explain, margin/editOps, margin/applyOps,
;; margin/status, margin/agent) as small commands, sent to the buffer's eglot server.  Needs
;; eglot (1.9 or later) managing the buffer with margin-lsp; see Margin's docs/editors.md,
;; "Emacs (eglot)".
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
;;   M-x margin-agent    give Margin's agent a task in this buffer's workspace (the region, if
;;                       active, is named in it); its steps and answer go to *margin-agent*
;;                       while Emacs stays usable; it asks before each edit, the diff shown
;;                       in *margin-agent*.  With C-u, the last agent thread goes on.
;;   M-x margin-agent-stop  cancel the running task (its completed steps are kept)

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

;;; The agent

(defcustom margin-agent-timeout 3600
  "Seconds `margin-agent' waits for the end of a task before it gives up and cancels it; nil
waits as long as it takes.  Keep it above the server's agentTurnTimeoutS (1800 s by default),
after which Margin ends the turn itself, its steps kept.  Emacs stays usable meanwhile."
  :type '(choice (const :tag "No limit" nil) number))

(defconst margin--agent-buffer "*margin-agent*")

(defconst margin--agent-asks "Margin's agent asks "
  "How Margin's confirmations (window/showMessageRequest) of an agent's edit or command begin.")

(defconst margin--agent-yes '("Accept" "Always in this thread")
  "The answers to a confirmation that let the edit through.")

(cl-defstruct (margin--run (:constructor margin--run-create) (:copier nil))
  "An agent task sent by `margin-agent'."
  server id token task
  (step 0)   ; the step running now
  (shown 0)  ; the calls and told lines shown as they streamed
  accepted   ; the last confirmation let the next edit through
  always     ; ... and every edit after it ("Always in this thread")
  stopping result error done)

(defvar margin--agent nil
  "The last task of `margin-agent' (a `margin--run'): running until its `done' is set.")

(defvar margin--agent-thread nil "The agent thread of the last task Margin answered.")

(defvar margin--agent-count 0)

(defvar eglot-confirm-server-edits)     ; eglot 1.12+'s name of the next one
(defvar eglot-confirm-server-initiated-edits)

(defun margin-agent-running-p ()
  "Whether a task of `margin-agent' is running."
  (and margin--agent (not (margin--run-done margin--agent)) t))

(defun margin--agent-insert (text)
  "Append TEXT to *margin-agent*; point, and the windows showing the end, follow it."
  (with-current-buffer (get-buffer-create margin--agent-buffer)
    (unless (derived-mode-p 'special-mode) (special-mode))
    (let ((inhibit-read-only t)
          (at-end (= (point) (point-max)))
          (following (cl-remove-if-not (lambda (window) (= (window-point window) (point-max)))
                                       (get-buffer-window-list (current-buffer) nil t))))
      (save-excursion
        (goto-char (point-max))
        (insert text))
      (when at-end (goto-char (point-max)))
      (dolist (window following) (set-window-point window (point-max))))))

(defun margin--agent-short (value &optional width)
  "VALUE on one line, cut to WIDTH (60) characters."
  (truncate-string-to-width
   (string-trim (replace-regexp-in-string "[ \t\n]+" " " (if (stringp value) value (format "%s" value))))
   (or width 60) nil nil "…"))

(defun margin--agent-call-line (step tool args status &optional summary)
  "A call's line: \"step 1 · read calc.py → done\" (with the result's first line when it did
not go through)."
  (let* ((main (cl-some (lambda (key) (plist-get args key)) '(:path :query :command :pointer)))
         (start (plist-get args :start))
         (end (plist-get args :end))
         (lines (cond ((and start end) (format " %s-%s" start end))
                      (start (format " %s-" start))
                      (end (format " -%s" end))
                      (t ""))))
    (format "step %s · %s%s%s → %s%s\n" step tool (if main (concat " " (margin--agent-short main)) "")
            lines status
            (if (and summary (not (equal status "done")) (not (string-empty-p summary)))
                (format " (%s)" (margin--agent-short summary 100))
              ""))))

(defun margin--agent-told-line (step kind text)
  "What the model was told instead of a call: \"step 2 · told (malformed): ...\"."
  (format "step %s · told (%s): %s\n" step kind (margin--agent-short (car (split-string (or text "") "\n")) 100)))

(defun margin--agent-mode-line (run)
  (with-current-buffer (get-buffer-create margin--agent-buffer)
    (setq mode-line-process
          (cond ((margin--run-done run) nil)
                ((margin--run-stopping run) " stopping")
                (t (format " step %s" (margin--run-step run)))))
    (force-mode-line-update)))

(defun margin--agent-event (run event)
  "Show EVENT, a partial result of RUN's margin/agent."
  (let ((step (plist-get event :step)))
    (pcase (plist-get event :kind)
      ("step" (setf (margin--run-step run) step)
              (margin--agent-mode-line run))
      ("call" (unless (equal (plist-get event :tool) "finish")
                (cl-incf (margin--run-shown run))
                (margin--agent-insert (margin--agent-call-line step (plist-get event :tool) (plist-get event :args)
                                                               (plist-get event :status) (plist-get event :summary)))))
      ("told" (cl-incf (margin--run-shown run))
              (margin--agent-insert (margin--agent-told-line step (plist-get event :rejection)
                                                             (plist-get event :text)))))))

(defun margin--agent-steps (result)
  "RESULT's steps, a line per call and per rejection told (for a server that did not stream them)."
  (mapconcat (lambda (step)
               (let ((number (plist-get step :number)))
                 (concat (mapconcat (lambda (told) (margin--agent-told-line number (plist-get told :kind)
                                                                            (plist-get told :text)))
                                    (plist-get step :told) "")
                         (mapconcat (lambda (call)
                                      (if (equal (plist-get call :tool) "finish") ""
                                        (margin--agent-call-line number (plist-get call :tool) (plist-get call :args)
                                                                 (plist-get call :status))))
                                    (plist-get step :calls) ""))))
             (plist-get result :steps) ""))

(defun margin--agent-end (run result error)
  "RUN ended with RESULT (margin/agent's) or ERROR (a list: the code, if any, and a message)."
  (unless (margin--run-done run)
    (setf (margin--run-done run) t
          (margin--run-result run) result
          (margin--run-error run) error)
    (with-demoted-errors "Margin: %S"
      (if result
          (let* ((stopped (plist-get result :stopped))
                 (why (plist-get result :why))
                 (answer (or (plist-get result :answer) ""))
                 (edits (append (plist-get result :edits) nil)))
            (setq margin--agent-thread (plist-get result :threadId))
            (when (zerop (margin--run-shown run))
              (margin--agent-insert (margin--agent-steps result)))
            (margin--agent-insert
             (concat (format "answer: %s\n" answer)
                     (format "stopped: %s · %d step%s%s%s\n" stopped (length (plist-get result :steps))
                             (if (= (length (plist-get result :steps)) 1) "" "s")
                             (if edits
                                 (concat " · edited "
                                         (mapconcat (lambda (edit) (format "%s %s-%s" (plist-get edit :path)
                                                                           (plist-get edit :startLine)
                                                                           (plist-get edit :endLine)))
                                                    edits ", "))
                               "")
                             (if (and (stringp why) (not (string-empty-p why)) (not (equal why answer)))
                                 (format " (%s)" why) ""))))
            (message "Margin's agent: %s" stopped))
        (cl-destructuring-bind (code text) error
          (margin--agent-insert
           (if (eql code -32800)
               "stopped: cancelled; the steps that completed are kept in the agent thread\n"
             (format "failed: %s\n" text)))
          (message "Margin's agent: %s" (if (eql code -32800) "cancelled" text))))
      (margin--agent-mode-line run))))

(defun margin--agent-heading (task)
  "The heading of TASK in *margin-agent*: the task, the file and the region's lines."
  (format "%s> %s  (%s%s)\n"
          (if (> (buffer-size (get-buffer-create margin--agent-buffer)) 0) "\n" "")
          task (if buffer-file-name (file-name-nondirectory buffer-file-name) (buffer-name))
          (if (use-region-p)
              (format ", lines %d-%d" (line-number-at-pos (region-beginning))
                      (line-number-at-pos (max (region-beginning) (1- (region-end)))))
            "")))

(defun margin--agent-can-start ()
  (margin--server)
  (when (margin-agent-running-p)
    (user-error "Margin: an agent task is running (M-x margin-agent-stop stops it)")))

(defun margin-agent (task &optional continue)
  "Give Margin's agent TASK in this buffer's workspace folder, the region (if active) named in
it.  The request goes asynchronously (Emacs stays usable, for up to `margin-agent-timeout'):
each call the agent makes is shown in *margin-agent* as it happens, then its answer and how
the turn stopped.  Before an edit Margin asks, the diff shown in *margin-agent*.  With a prefix
argument (CONTINUE), the last task's agent thread goes on.  `margin-agent-stop' cancels it.
Returns the task (a `margin--run')."
  (interactive (progn (margin--agent-can-start)
                      (list (read-string (if current-prefix-arg "Margin agent, go on: " "Margin agent task: "))
                            current-prefix-arg)))
  (margin--agent-can-start)
  (when (string-empty-p (string-trim task))
    (user-error "Margin: no task given"))
  (let* ((server (margin--server))
         (token (format "margin-agent-%d" (cl-incf margin--agent-count)))
         (params (append (list :task task :partialResultToken token) (margin--where)
                         (and continue margin--agent-thread (list :threadId margin--agent-thread))))
         (run (margin--run-create :server server :token token :task task)))
    (when (bound-and-true-p eglot--managed-mode)
      (eglot--signal-textDocument/didChange))
    (margin--agent-insert (margin--agent-heading task))
    (display-buffer margin--agent-buffer)
    (setq margin--agent run)
    (margin--agent-mode-line run)
    ;; `jsonrpc--async-request-1': as `jsonrpc-async-request', which in Emacs 28 does not give
    ;; the request's id, needed to cancel it.
    (setf (margin--run-id run)
          (car (jsonrpc--async-request-1
                server :margin/agent params
                :success-fn (lambda (result) (margin--agent-end run result nil))
                :error-fn (jsonrpc-lambda (&key code message &allow-other-keys)
                            (margin--agent-end run nil (list code message)))
                :timeout-fn (lambda ()
                              (margin--agent-cancel run)
                              (margin--agent-end run nil (list nil (format "no answer within margin-agent-timeout (%s s): Margin was asked to cancel it"
                                                                           margin-agent-timeout))))
                :timeout margin-agent-timeout)))
    run))

(defun margin--agent-cancel (run)
  (let ((server (margin--run-server run)))
    (when (and (margin--run-id run) (jsonrpc-running-p server))
      (jsonrpc-notify server :$/cancelRequest (list :id (margin--run-id run))))))

(defun margin-agent-stop ()
  "Cancel the running task of `margin-agent' ($/cancelRequest): Margin stops it, and keeps
the steps that completed in its agent thread.  Asked again while it is stopping: stop waiting
for Margin's answer."
  (interactive)
  (unless (margin-agent-running-p)
    (user-error "Margin: no agent task is running"))
  (let ((run margin--agent))
    (if (margin--run-stopping run)
        (margin--agent-end run nil (list nil "stopped waiting for Margin's answer"))
      (setf (margin--run-stopping run) t)
      (margin--agent-cancel run)
      (margin--agent-insert "stopping…\n")
      (margin--agent-mode-line run))
    run))

(defun margin--agent-show-asked (text)
  "Show Margin's question TEXT (an edit's diff, or a command) in *margin-agent*, from its start."
  (require 'diff-mode)
  (let ((start (with-current-buffer (get-buffer-create margin--agent-buffer) (point-max))))
    (margin--agent-insert
     (concat (mapconcat (lambda (line)
                          (propertize line 'face
                                      (cond ((string-prefix-p margin--agent-asks line) 'bold)
                                            ((string-match-p "\\`\\(---\\|\\+\\+\\+\\) " line) 'diff-file-header)
                                            ((string-prefix-p "@@" line) 'diff-hunk-header)
                                            ((string-prefix-p "+" line) 'diff-added)
                                            ((string-prefix-p "-" line) 'diff-removed))))
                        (split-string text "\n") "\n")
             "\n"))
    (let ((window (display-buffer margin--agent-buffer)))
      (when window (set-window-start window start)))))

(cl-defmethod eglot-handle-request :around
  (server (method (eql window/showMessageRequest)) &rest params)
  "Margin's agent asks before an edit or a command: the question, an edit's whole diff with it,
is shown in *margin-agent*, then eglot asks in the minibuffer, naming the change on one line.
\\[keyboard-quit] there answers no."
  (let ((text (plist-get params :message)))
    (if (not (and (stringp text) (string-prefix-p margin--agent-asks text)))
        (cl-call-next-method)
      (let* ((run (and (margin-agent-running-p) (eq server (margin--run-server margin--agent)) margin--agent))
             (lines (split-string text "\n"))
             (failed nil)
             (answer (progn
                       (margin--agent-show-asked text)
                       ;; Asked even while the minibuffer is in use (M-x half typed).
                       (let ((enable-recursive-minibuffers t))
                         (condition-case err
                             (if (cdr lines)
                                 (apply #'cl-call-next-method server method
                                        (plist-put (copy-sequence params) :message
                                                   (format "%s (the diff is in %s)"
                                                           (string-remove-suffix ":" (car lines))
                                                           margin--agent-buffer)))
                               (cl-call-next-method))
                           ;; An answer of JSON null (jsonrpc cannot send eglot's :null): no.
                           (quit nil)
                           (error (setq failed (error-message-string err)) nil)))))
             (title (and (consp answer) (plist-get answer :title))))
        (margin--agent-insert (format "→ %s\n" (cond (title)
                                                     (failed (format "not asked (%s): no" failed))
                                                     (t "no answer: no"))))
        (when (and run (not (string-prefix-p (concat margin--agent-asks "to run") text)))  ; an edit's
          (setf (margin--run-accepted run) (and (member title margin--agent-yes) t))
          (when (equal title "Always in this thread")
            (setf (margin--run-always run) t)))
        answer))))

(defun margin--send-changes (edit)
  "Send now the didChange of the buffers EDIT (a WorkspaceEdit) changed: eglot sends it when
Emacs is idle, and the agent reads the file next."
  (mapc (lambda (change)
          (let* ((uri (plist-get (plist-get change :textDocument) :uri))
                 (buffer (and (stringp uri) (find-buffer-visiting (eglot--uri-to-path uri)))))
            (when buffer
              (with-current-buffer buffer
                (when (bound-and-true-p eglot--managed-mode)
                  (eglot--signal-textDocument/didChange))))))
        (plist-get edit :documentChanges)))

(cl-defmethod eglot-handle-request :around
  (server (_method (eql workspace/applyEdit)) &rest params)
  "While an agent task runs: an edit the person has just accepted in Margin's question is
applied without eglot's own \"Server wants to edit\" question, and its didChange is sent at once."
  (let ((run margin--agent))
    (if (not (and (margin-agent-running-p) (eq server (margin--run-server run))))
        (cl-call-next-method)
      (let ((accepted (margin--run-accepted run)))
        (unless (margin--run-always run)
          (setf (margin--run-accepted run) nil))
        (prog1 (if accepted
                   (let ((eglot-confirm-server-initiated-edits nil)
                         (eglot-confirm-server-edits nil))
                     (cl-call-next-method))
                 (cl-call-next-method))
          (margin--send-changes (plist-get params :edit)))))))

(cl-defmethod eglot-handle-notification :before
  (_server (_method (eql $/progress)) &key token value &allow-other-keys)
  "The steps of `margin-agent''s task, as they stream."
  (let ((run margin--agent))
    (when (and (margin-agent-running-p) (equal token (margin--run-token run)))
      (with-demoted-errors "Margin: %S"
        (margin--agent-event run value)))))

(provide 'margin)
;;; margin.el ends here
