;;; agent.el --- Margin's agent from Emacs with client-emacs/margin.el  -*- lexical-binding: t; -*-
;; Five tasks with `margin-agent', run as a person runs it (M-x, the task read in the
;; minibuffer), each waited for while Emacs goes on: one whose edit the person accepts in
;; Margin's question (eglot's `window/showMessageRequest' prompt, answered by binding the
;; `completing-read-function' eglot asks with; what *margin-agent* showed at that moment is
;; recorded), the buffer then saved; one whose edit is rejected; one whose question is left
;; with C-g; one whose question fails to be asked (the minibuffer in use); and one stopped with
;; `margin-agent-stop' while the model is still thinking.  eglot's own question before a
;; server's edit (`eglot-confirm-server-initiated-edits', its default `confirm') is recorded too.
;; Environment: MARGIN_EMACS_FILE, MARGIN_EMACS_CLIENT (the folder of margin.el),
;; MARGIN_EMACS_OUT.

(load (expand-file-name "harness.el" (file-name-directory load-file-name)) nil t)
(margin-h-watchdog 280)
(add-to-list 'load-path (getenv "MARGIN_EMACS_CLIENT"))
(require 'margin)

(defvar agent-answer "Accept"
  "The button the next confirmation gets (`quit': C-g; `fail': the prompt fails).")
(defvar agent-asked nil "Each confirmation: what eglot prompted, and what *margin-agent* showed then.")
(defvar agent-eglot-asked nil "eglot's own questions before an edit (y-or-n-p).")

(defun agent-text (&optional buffer)
  (with-current-buffer (or buffer (current-buffer))
    (buffer-substring-no-properties (point-min) (point-max))))

;; eglot asks window/showMessageRequest with `completing-read'; the person reads and answers.
(setq completing-read-function
      (lambda (prompt collection &rest _)
        (let* ((buffer (get-buffer "*margin-agent*"))
               (window (and buffer (get-buffer-window buffer t))))
          (push (list :prompt prompt
                      :choices (vconcat (mapcar (lambda (c) (if (consp c) (car c) c)) collection))
                      :shown (if window t :json-false)
                      ;; what the window shows, from its start: the question and its diff
                      :window_text (if window
                                       (with-current-buffer buffer
                                         (buffer-substring-no-properties (window-start window) (point-max)))
                                     ""))
                agent-asked))
        (pcase agent-answer
          ('quit (signal 'quit nil))    ; the person presses C-g
          ('fail (error "Command attempted to use minibuffer while in minibuffer"))
          (_ agent-answer))))
(advice-add 'y-or-n-p :override (lambda (prompt) (push prompt agent-eglot-asked) t))

(defun agent-run (task answer)
  "Run TASK as M-x margin-agent does, confirmations answered ANSWER; the task (a
`margin--run'), and whether `margin-agent' returned before it ended."
  (setq agent-answer answer)
  (let ((run (cl-letf (((symbol-function 'read-string) (lambda (_prompt &rest _) task)))
               (call-interactively #'margin-agent))))
    (list run (margin-agent-running-p))))

(defun agent-wait (run)
  (margin-h-wait "the agent task to end" (lambda () (margin--run-done run)) 120))

(let (buffer)
  (margin-h-step "open"
    (setq buffer (margin-h-open (getenv "MARGIN_EMACS_FILE")))
    ;; init.el turns eglot's question before a server's edit off: back to eglot's default.
    (setq eglot-confirm-server-initiated-edits 'confirm)
    (margin-h-put 'change_annotation_support
                  (let ((edit (plist-get (plist-get (eglot-client-capabilities (eglot-current-server)) :workspace)
                                         :workspaceEdit)))
                    (if (plist-get edit :changeAnnotationSupport) t :json-false))))
  (margin-h-step "accepted"
    (with-current-buffer buffer
      (let* ((sent (agent-run "fix add" "Accept"))
             (run (car sent)))
        (margin-h-put 'async (if (cadr sent) t :json-false))
        (agent-wait run)
        (margin-h-put 'accepted_stopped (plist-get (margin--run-result run) :stopped))
        (margin-h-put 'accepted_answer (plist-get (margin--run-result run) :answer))
        (margin-h-put 'accepted_text (agent-text))
        (margin-h-put 'accepted_asked (vconcat (reverse agent-asked)))
        (margin-h-put 'accepted_eglot_asked (vconcat agent-eglot-asked))
        (margin-h-put 'accepted_shown (agent-text "*margin-agent*"))
        ;; The server's copy, asked without sending the buffer's edits first (batch Emacs runs
        ;; no idle timers, so eglot itself would not have sent the edit's didChange yet).
        (margin-h-put 'accepted_server_copy
                      (plist-get (cl-find (plist-get (eglot--TextDocumentIdentifier) :uri)
                                          (plist-get (jsonrpc-request (eglot-current-server) :margin/status
                                                                      eglot--{} :timeout 60)
                                                     :files)
                                          :key (lambda (file) (plist-get file :uri)) :test #'equal)
                                 :fingerprint))
        (save-buffer)
        (margin-h-record-copy 'saved))))
  (margin-h-step "rejected"
    (with-current-buffer buffer
      (setq agent-asked nil agent-eglot-asked nil)
      (let ((run (car (agent-run "make add multiply" "Reject"))))
        (agent-wait run)
        (margin-h-put 'rejected_stopped (plist-get (margin--run-result run) :stopped))
        (margin-h-put 'rejected_asked (vconcat (mapcar (lambda (a) (plist-get a :prompt)) (reverse agent-asked))))
        (margin-h-put 'rejected_eglot_asked (vconcat agent-eglot-asked))
        (margin-h-put 'rejected_text (agent-text))
        (margin-h-record-copy 'rejected_copy))))
  (margin-h-step "quit"
    (with-current-buffer buffer
      (setq agent-asked nil agent-eglot-asked nil)
      (let ((run (car (agent-run "make add divide" 'quit))))
        (agent-wait run)
        (margin-h-put 'quit_stopped (plist-get (margin--run-result run) :stopped))
        (margin-h-put 'quit_asked (length agent-asked))
        (margin-h-put 'quit_text (agent-text)))))
  (margin-h-step "prompt failed"
    (with-current-buffer buffer
      (let ((run (car (agent-run "make add subtract" 'fail))))
        (agent-wait run)
        (margin-h-put 'failed_stopped (plist-get (margin--run-result run) :stopped))
        (margin-h-put 'failed_text (agent-text)))))
  (margin-h-step "stopped"
    (with-current-buffer buffer
      (let* ((shown-before (agent-text "*margin-agent*"))
             (run (car (agent-run "take your time" "Accept"))))
        ;; The first step's read is shown; the model is thinking over the second step.
        (margin-h-wait "the first step of the last task"
                       (lambda () (string-match-p "step 1 · read calc.py → done"
                                                  (substring (agent-text "*margin-agent*") (length shown-before)))))
        (margin-h-put 'running_before_stop (if (margin-agent-running-p) t :json-false))
        (margin-agent-stop)
        (agent-wait run)
        (margin-h-put 'stop_error (vconcat (margin--run-error run)))
        (margin-h-put 'stopped_text (agent-text)))))
  (margin-h-step "shown"
    (margin-h-put 'shown (agent-text "*margin-agent*")))
  (margin-h-step "stop"
    (margin-h-put 'stopped (with-current-buffer buffer (margin-h-stop))))
  (margin-h-finish))
;;; agent.el ends here
