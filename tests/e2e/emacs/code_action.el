;;; code_action.el --- a Margin code action chosen in Emacs, through the command fallback  -*- lexical-binding: t; -*-
;; Selects whole lines, asks eglot for code actions on the region and chooses Margin's in
;; eglot's own menu code (`eglot-code-actions', interactively, the minibuffer answered with the
;; title): eglot 1.9 cannot resolve code actions, so it runs the action's command
;; `margin.editSelection'; Margin applies the edit with workspace/applyEdit, and the buffer is
;; saved; eglot waits for the command's answer as long as it does by default
;; (`jsonrpc-default-request-timeout', 10 s). Environment: MARGIN_EMACS_FILE, MARGIN_EMACS_LINES
;; ("first,last", 1-based), MARGIN_EMACS_TITLE (the action), MARGIN_EMACS_KIND (when set, the
;; menu is asked for with a prefix argument, `C-u M-x eglot-code-actions', and eglot's kind prompt
;; answered with it), MARGIN_EMACS_OUT. Recorded too: the titles `eglot-code-action-rewrite'
;; lists (in eglot 1.9 that command only lists: it calls `eglot-code-actions' without its
;; INTERACTIVE argument).

(load (expand-file-name "harness.el" (file-name-directory load-file-name)) nil t)
(margin-h-watchdog 240)

(let (buffer before)
  (margin-h-step "open"
    (setq buffer (margin-h-open (getenv "MARGIN_EMACS_FILE")))
    (margin-h-put 'request_timeout jsonrpc-default-request-timeout))
  (margin-h-step "choose the action"
    (with-current-buffer buffer
      (let* ((lines (split-string (getenv "MARGIN_EMACS_LINES") ","))
             (wanted (getenv "MARGIN_EMACS_TITLE"))
             (kind (let ((k (getenv "MARGIN_EMACS_KIND"))) (and k (not (string-empty-p k)) k)))
             (current-prefix-arg (and kind '(4)))
             (beg (progn (goto-char (point-min)) (forward-line (1- (string-to-number (car lines)))) (point)))
             (end (progn (goto-char (point-min)) (forward-line (string-to-number (cadr lines))) (point)))
             (transient-mark-mode t)
             ;; eglot's menu: the titles offered, answered with the wanted one (a keyboard
             ;; event, not a mouse click, so eglot asks with `completing-read').
             (last-nonmenu-event ?\r)
             (completing-read-function
              (lambda (prompt collection &rest _)
                (if (string-prefix-p "[eglot] Action kind" prompt)
                    kind
                  (margin-h-put 'offered (vconcat (mapcar #'car collection)))
                  wanted)))
             (started (float-time)))
        (setq before (buffer-substring-no-properties (point-min) (point-max)))
        (set-mark beg)
        (goto-char end)
        (activate-mark)
        (margin-h-put 'rewrite_listed
                      (vconcat (mapcar (lambda (a) (plist-get a :title)) (eglot-code-action-rewrite beg end))))
        (advice-add 'eglot-execute-command :around
                    (lambda (run &rest args)
                      (let ((result (apply run args)))
                        (margin-h-put 'command (format "%s" (nth 1 args)))
                        (margin-h-put 'command_result result)
                        (margin-h-put 'command_answered_s (- (float-time) started))
                        result))
                    '((name . margin-h-record)))
        (margin-h-put 'changed_when_answered
                      (progn (call-interactively #'eglot-code-actions)
                             (if (equal before (buffer-substring-no-properties (point-min) (point-max)))
                                 :json-false
                               t))))))
  (margin-h-step "the edit arrives"
    (with-current-buffer buffer
      (margin-h-wait "Margin's edit in the buffer"
                     (lambda () (not (equal before (buffer-substring-no-properties (point-min) (point-max)))))
                     90)
      (margin-h-record-copy 'edited)
      (save-buffer)
      (margin-h-record-copy 'saved)))
  (margin-h-step "stop"
    (margin-h-put 'stopped (with-current-buffer buffer (margin-h-stop))))
  (margin-h-finish))
