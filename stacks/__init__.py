"""Infrastructure of mapload (aws_cdk only; never imports runtime code or boto3)."""
