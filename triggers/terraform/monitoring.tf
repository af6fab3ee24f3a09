# An external health check as code: Cloud Monitoring probes the public push endpoint from
# several regions, and an alert policy fires when the probes fail. Only /push, /hooks/deploy and
# /ticks are routed by the Ingress (the health and metrics routes stay in the cluster), so the
# probe asks GET /push: the service answers 405 (the route takes POST only) without credentials
# and without running anything, which proves DNS, the certificate, the load balancer, a ready
# pod and the app's routing. A 5xx, a timeout or a certificate fault fails the check.

locals {
  public_host = regex("^https://([^/]+)/push$", var.push_endpoint)[0]
}

resource "google_monitoring_uptime_check_config" "push" {
  project      = var.project_id
  display_name = "${var.name} push endpoint"
  period       = var.uptime_check_period
  timeout      = "10s"

  http_check {
    request_method = "GET"
    path           = "/push"
    port           = 443
    use_ssl        = true
    validate_ssl   = true
    accepted_response_status_codes {
      status_value = 405
    }
  }

  monitored_resource {
    type = "uptime_url"
    labels = {
      project_id = var.project_id
      host       = local.public_host
    }
  }

  depends_on = [google_project_service.apis]
}

resource "google_monitoring_alert_policy" "push_uptime" {
  project               = var.project_id
  display_name          = "${var.name} push endpoint is down"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels

  conditions {
    display_name = "uptime check of the push endpoint fails in more than one region"
    condition_threshold {
      filter          = "metric.type=\"monitoring.googleapis.com/uptime_check/check_passed\" AND resource.type=\"uptime_url\" AND metric.label.check_id=\"${google_monitoring_uptime_check_config.push.uptime_check_id}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 1
      duration        = "${var.uptime_alert_after_seconds}s"
      aggregations {
        alignment_period     = "1200s"
        per_series_aligner   = "ALIGN_NEXT_OLDER"
        cross_series_reducer = "REDUCE_COUNT_FALSE"
        group_by_fields      = ["resource.label.host"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "The push endpoint ${var.push_endpoint} does not answer from outside: Pub/Sub's deliveries are failing too and back off toward the dead-letter limit. Check the Ingress, the certificate and the pods' readiness (docs/operations.md)."
  }
}
